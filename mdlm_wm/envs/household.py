"""Household: an ALFWorld-like home where an agent moves objects between furniture.

World. 2-4 rooms (the kitchen plus some of living room, bedroom, bathroom,
study) joined as a random tree: from a room you can walk only to its exits.
Each room holds furniture ("receptacles"): the kitchen always has a fridge, a
microwave, a stove and a sink basin; other pieces are drawn per room, and
cabinets, drawers and shelves are numbered across the house (`cabinet 2`).
Some furniture opens and closes; a closed one hides its contents. 6-10
objects (apple, mug, knife, book, ...) lie in or on the furniture. Hidden
state: where every object is, which containers are open, the temperature
(hot/cold) and cleanliness of every object, what the agent holds (one object
at most), and the steer's counters.

Actions are free text: look, inventory, go to <room or furniture>, open X,
close X, take X from Y, put X in/on Y, heat X with microwave (or stove),
cool X with fridge, clean X with sink basin, examine X. Furniture can only be
used when the agent stands at it; rooms are reached one exit at a time.

Tasks. pick (put an X on Y), heat / cool / clean (put a hot / cold / clean X
on Y) and two (put two Xs on Y). Progress counts sub-goals over the whole
house: for a state task, 1 for an object of the type in that state and 1 more
once it lies on the target; for pick and two, 1 per object on the target.

Observation. Every next state is `<message> <view> <status>`. The view
describes where the agent stands: the room (furniture and exits), or one
piece of furniture (its contents, "closed", or "too dark"). The status line
is the trailing anchor; its values depend on the whole hidden state:
  [room: kitchen | at: fridge | holding: apple | state: cold | open: fridge,
   drawer 1 | visible: 2 | progress: 1/2]
`open` lists open containers anywhere in the house, `visible` counts the
objects listed in the view, `state` is the held object's condition.

Steers (each adds its own key to the status line):
  - sticky doors: every container needs two `open` tries (`tries: 1/2`);
    solvable, the expert simply tries again (`doors: sticky`).
  - broken microwave: heating with it fails and changes nothing; the stove
    still heats, and the expert uses it (`microwave: broken`).
  - lights off: the contents of furniture stay unseen (visible 0) until the
    agent examines it; taking needs that (`lights: off`).
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Mapping

from mdlm_wm.checks import generic
from mdlm_wm.data.schema import Checks, Spec, Step
from mdlm_wm.envs.base import Env, StepResult, register

STICKY = "Doors stick: every container needs two tries to open."
BROKEN = "The microwave is broken: heating with it has no effect."
DARK = ("The user keeps the lights off: you must examine a piece of furniture to see what is "
        "in or on it.")
_STEER_FIELD = {STICKY: ("doors", "sticky"), BROKEN: ("microwave", "broken"),
                DARK: ("lights", "off")}

# Furniture name -> (preposition, openable). Names never contain an object name,
# so that a hidden object's name can be required to be absent from the text.
_FURNITURE = {
    "fridge": ("in", True), "microwave": ("in", True), "stove": ("on", False),
    "sink basin": ("in", False), "countertop": ("on", False), "dining table": ("on", False),
    "cabinet": ("in", True), "drawer": ("in", True), "shelf": ("on", False),
    "sofa": ("on", False), "coffee table": ("on", False), "tv stand": ("on", False),
    "bed": ("on", False), "desk": ("on", False), "side table": ("on", False),
    "wardrobe": ("in", True), "bathtub": ("in", False), "laundry basket": ("in", False),
    "garbage can": ("in", False), "armchair": ("on", False), "work table": ("on", False),
    "safe": ("in", True),
}
_NUMBERED = ("cabinet", "drawer", "shelf")
_KITCHEN_FIXED = ("fridge", "microwave", "stove", "sink basin")
_ROOM_CHOICES = {
    "kitchen": ("countertop", "dining table", "cabinet", "cabinet", "drawer", "shelf"),
    "living room": ("sofa", "coffee table", "tv stand", "cabinet", "drawer", "shelf"),
    "bedroom": ("bed", "desk", "side table", "wardrobe", "drawer", "shelf"),
    "bathroom": ("bathtub", "laundry basket", "garbage can", "cabinet", "drawer", "shelf"),
    "study": ("armchair", "work table", "safe", "cabinet", "drawer", "shelf"),
}
_OTHER_ROOMS = ("living room", "bedroom", "bathroom", "study")
_APPLIANCES = ("fridge", "microwave", "stove", "sink basin")

_FOOD = ("apple", "egg", "potato", "tomato", "bread", "lettuce")
_DISHES = ("mug", "cup", "plate", "bowl")
_UTENSILS = ("knife", "fork", "spoon")
_CLOTHS = ("sponge", "cloth")
_THINGS = ("book", "pencil", "candle", "keychain", "remote", "watch", "vase")
_KINDS = _FOOD + _DISHES + _UTENSILS + _CLOTHS + _THINGS
# Which object kinds each treatment accepts.
_CAN = {"heat": _FOOD + _DISHES, "cool": _FOOD + _DISHES,
        "clean": _FOOD + _DISHES + _UTENSILS + _CLOTHS}
_PLURAL = {"apple": "apples", "egg": "eggs", "potato": "potatoes", "tomato": "tomatoes",
           "mug": "mugs", "cup": "cups", "plate": "plates", "bowl": "bowls",
           "knife": "knives", "fork": "forks", "spoon": "spoons", "sponge": "sponges",
           "book": "books", "pencil": "pencils", "candle": "candles", "remote": "remotes",
           "watch": "watches", "vase": "vases"}
# Treatment verb -> the condition it gives; device -> the verb it performs.
_RESULT = {"heat": "hot", "cool": "cold", "clean": "clean"}
_DEVICE_VERB = {"microwave": "heat", "stove": "heat", "fridge": "cool", "sink basin": "clean"}
_PARTICIPLE = {"heat": "heated", "cool": "cooled", "clean": "cleaned"}

_TASK_KINDS = ("pick", "heat", "cool", "clean", "two")
_TEMPLATES = {
    "pick": ("Put {a} {t} {p} the {r}.", "Find {a} {t} and place it {p} the {r}."),
    "heat": ("Put a hot {t} {p} the {r}.", "Heat {a} {t} and put it {p} the {r}."),
    "cool": ("Put a cold {t} {p} the {r}.", "Cool {a} {t} and put it {p} the {r}."),
    "clean": ("Put a clean {t} {p} the {r}.", "Clean {a} {t} and put it {p} the {r}."),
    "two": ("Put two {pl} {p} the {r}.", "Find two {pl} and place them {p} the {r}."),
}
_USAGE = {"go": "go to X", "open": "open X", "close": "close X", "take": "take X from Y",
          "put": "put X in/on Y", "heat": "heat X with Y", "cool": "cool X with Y",
          "clean": "clean X with Y", "examine": "examine X"}
_BOGUS_THINGS = ("banana", "teapot", "hammer", "guitar")
_BOGUS_PLACES = ("garage", "attic", "balcony", "cellar")
_GIBBERISH = ("fly to the moon", "dance", "sing loudly", "open", "take", "put", "go to",
              "heat", "examine")


@dataclasses.dataclass
class _Rec:
  name: str
  room: str
  prep: str
  openable: bool
  is_open: bool
  contents: list[str]
  tries: int = 0


@dataclasses.dataclass
class _Obj:
  name: str
  kind: str
  temp: str = ""  # "", "hot" or "cold": hot and cold replace each other.
  clean: bool = False


@dataclasses.dataclass(frozen=True)
class _Task:
  kind: str
  otype: str
  target: str
  count: int
  need: str  # the condition the placed objects need: "", "hot", "cold", "clean".


@dataclasses.dataclass
class _World:
  rooms: list[str]
  exits: dict[str, list[str]]
  recs: dict[str, _Rec]  # in house order: rooms, then furniture within a room.
  objs: dict[str, _Obj]
  task: _Task
  steer: str
  room: str
  at: str | None = None  # furniture the agent stands at; None: the room itself.
  held: str | None = None
  lit: str | None = None  # furniture examined since arriving (lights-off steer).


class _Fail(Exception):
  """A failed action: its error message and the objects the message names."""

  def __init__(self, msg: str, mentions: tuple[str, ...] = ()):
    super().__init__(msg)
    self.msg = msg
    self.mentions = mentions


# --------------------------------------------------------------------------
# World generation.


def _build_world(seed: int, steer: str) -> _World:
  """Draws rooms, furniture, objects and a task; the steer never affects them."""
  rng = random.Random(f"household/{seed}")
  rooms = ["kitchen"] + rng.sample(_OTHER_ROOMS, rng.randint(1, 3))
  rng.shuffle(rooms)
  exits: dict[str, list[str]] = {r: [] for r in rooms}
  for i in range(1, len(rooms)):
    other = rooms[rng.randrange(i)]
    exits[rooms[i]].append(other)
    exits[other].append(rooms[i])
  for r in rooms:
    exits[r].sort(key=rooms.index)
  recs = _place_furniture(rng, rooms)
  task = _draw_task(rng, recs)
  objs = _place_objects(rng, recs, task)
  return _World(rooms, exits, recs, objs, task, steer, room=rng.choice(rooms))


def _place_furniture(rng: random.Random, rooms: list[str]) -> dict[str, _Rec]:
  """Furniture per room; numbered kinds get house-wide numbers in house order."""
  numbers = {k: 0 for k in _NUMBERED}
  recs: dict[str, _Rec] = {}
  for room in rooms:
    choices = _ROOM_CHOICES[room]
    if room == "kitchen":
      kinds = list(_KITCHEN_FIXED) + rng.sample(choices, rng.randint(1, 3))
    else:
      kinds = rng.sample(choices, rng.randint(2, 4))
    for kind in kinds:
      name = kind
      if kind in _NUMBERED:
        numbers[kind] += 1
        name = f"{kind} {numbers[kind]}"
      prep, openable = _FURNITURE[kind]
      recs[name] = _Rec(name, room, prep, openable, openable and rng.random() < 0.2, [])
  return recs


def _draw_task(rng: random.Random, recs: dict[str, _Rec]) -> _Task:
  kind = rng.choice(_TASK_KINDS)
  if kind in _CAN:
    otype = rng.choice(_CAN[kind])
  elif kind == "two":
    otype = rng.choice(sorted(_PLURAL))
  else:
    otype = rng.choice(_KINDS)
  targets = [n for n in recs if n not in _APPLIANCES]
  target = rng.choice(targets)
  return _Task(kind, otype, target, 2 if kind == "two" else 1, _RESULT.get(kind, ""))


def _place_objects(rng: random.Random, recs: dict[str, _Rec], task: _Task) -> dict[str, _Obj]:
  """Task objects (1-3 of the type, never on the target) plus unique distractors."""
  n_task = rng.randint(2, 3) if task.kind == "two" else rng.randint(1, 2)
  names = [task.otype] if n_task == 1 else [f"{task.otype} {i}" for i in range(1, n_task + 1)]
  objs = {n: _Obj(n, task.otype) for n in names}
  others = [k for k in _KINDS if k != task.otype]
  for kind in rng.sample(others, rng.randint(5, 7)):
    objs[kind] = _Obj(kind, kind)
  for name, o in objs.items():
    where = rng.choice([s for s in recs if not (o.kind == task.otype and s == task.target)])
    recs[where].contents.append(name)
  return objs


def _task_text(rng: random.Random, w: _World) -> str:
  t = w.task
  prep = w.recs[t.target].prep
  article = "an" if t.otype[0] in "aeiou" else "a"
  template = rng.choice(_TEMPLATES[t.kind])
  return template.format(a=article, t=t.otype, p=prep, r=t.target, pl=_PLURAL.get(t.otype, ""))


def _rules(w: _World) -> tuple[str, ...]:
  rules = [
      "Commands: look, inventory, go to X, open X, close X, take X from Y, put X in/on Y, "
      "heat X with microwave or stove, cool X with fridge, clean X with sink basin, examine X.",
      "You can go to furniture in your room, or to a room listed as an exit.",
      "You must stand at a piece of furniture to use it; a closed one hides its contents.",
      "You can hold one object at a time.",
      "Food and dishes can be heated and cooled (hot and cold replace each other); food, "
      "dishes, utensils, sponges and cloths can be cleaned.",
      "The status line gives room, place, held object and its state, open containers in the "
      "house, visible objects and task progress.",
  ]
  if w.steer:
    rules.append(f"Steer: {w.steer}")
  return tuple(rules)


# --------------------------------------------------------------------------
# Hidden-state queries.


def _condition(o: _Obj) -> str:
  flags = [f for f in (o.temp, "clean" if o.clean else "") if f]
  return ", ".join(flags) or "plain"


def _has(o: _Obj, need: str) -> bool:
  return not need or (o.clean if need == "clean" else o.temp == need)


def _location(w: _World, obj: str) -> str | None:
  """The furniture holding `obj`; None while the agent holds it."""
  for rec in w.recs.values():
    if obj in rec.contents:
      return rec.name
  return None


def _sees_into(w: _World, rec: _Rec) -> bool:
  lit = w.steer != DARK or w.lit == rec.name
  return (rec.is_open or not rec.openable) and lit


def _visible(w: _World) -> list[str]:
  if w.at is None or not _sees_into(w, w.recs[w.at]):
    return []
  return list(w.recs[w.at].contents)


def _progress(w: _World) -> tuple[int, int]:
  """Sub-goals met: per object, 1 for the needed state and 1 for lying on the target."""
  t = w.task
  target = w.recs[t.target].contents
  scores = []
  for o in w.objs.values():
    if o.kind != t.otype:
      continue
    ok = _has(o, t.need)
    placed = o.name in target and ok
    scores.append((1 if ok else 0) + (1 if placed else 0) if t.need else int(placed))
  per_object = 2 if t.need else 1
  return sum(sorted(scores, reverse=True)[:t.count]), t.count * per_object


def _distances(w: _World, start: str) -> dict[str, int]:
  dist = {start: 0}
  frontier = [start]
  while frontier:
    nxt = []
    for r in frontier:
      for e in w.exits[r]:
        if e not in dist:
          dist[e] = dist[r] + 1
          nxt.append(e)
    frontier = nxt
  return dist


def _status(w: _World) -> dict[str, str]:
  opened = [r.name for r in w.recs.values() if r.openable and r.is_open]
  done, total = _progress(w)
  status = {
      "room": w.room, "at": w.at or "center", "holding": w.held or "nothing",
      "state": _condition(w.objs[w.held]) if w.held else "none",
      "open": ", ".join(opened) or "none", "visible": str(len(_visible(w))),
      "progress": f"{done}/{total}",
  }
  if w.steer:
    key, value = _STEER_FIELD[w.steer]
    status[key] = value
  return status


# --------------------------------------------------------------------------
# Rendering.


def _view(w: _World) -> str:
  if w.at is None:
    furniture = ", ".join(r.name for r in w.recs.values() if r.room == w.room)
    return (f"You are in the {w.room}. Furniture: {furniture}. "
            f"Exits: {', '.join(w.exits[w.room])}.")
  rec = w.recs[w.at]
  if rec.openable and not rec.is_open:
    return f"The {rec.name} is closed."
  if not _sees_into(w, rec):
    return f"It is too dark to see what is {rec.prep} the {rec.name}."
  items = ", ".join(rec.contents) or "nothing"
  return f"{rec.prep.capitalize()} the {rec.name} you see: {items}."


def _render(w: _World, msg: str) -> str:
  status = " | ".join(f"{k}: {v}" for k, v in _status(w).items())
  return " ".join(p for p in (msg, _view(w), f"[{status}]") if p)


# --------------------------------------------------------------------------
# Action parsing.

_PATTERNS = (
    ("look", re.compile(r"^(?:look|l)$")),
    ("inventory", re.compile(r"^(?:inventory|i)$")),
    ("go", re.compile(r"^go to (.+)$")),
    ("open", re.compile(r"^open (.+)$")),
    ("close", re.compile(r"^close (.+)$")),
    ("examine", re.compile(r"^examine (.+)$")),
    ("take", re.compile(r"^take (.+?) from (.+)$")),
    ("put", re.compile(r"^put (.+?) (?:in/on|in|on|into|onto) (.+)$")),
    ("heat", re.compile(r"^heat (.+?) with (.+)$")),
    ("cool", re.compile(r"^cool (.+?) with (.+)$")),
    ("clean", re.compile(r"^clean (.+?) with (.+)$")),
)
_ARTICLE = re.compile(r"^(?:the|a|an) ")


def _parse(action: str) -> tuple[str, tuple[str, ...]]:
  """(verb, names) of a command; raises _Fail without echoing the raw text."""
  text = " ".join(action.lower().split())
  for verb, pattern in _PATTERNS:
    m = pattern.match(text)
    if m:
      return verb, tuple(_ARTICLE.sub("", g) for g in m.groups())
  first = text.split(" ", 1)[0] if text else ""
  if first in _USAGE:
    raise _Fail(f"Error: usage: {_USAGE[first]}.")
  raise _Fail("Error: unknown command.")


# --------------------------------------------------------------------------
# The environment.


@register
class HouseholdEnv(Env):
  """ALFWorld-like household: find, treat and place objects across rooms."""

  name = "household"
  max_steps = 40
  steers = (STICKY, BROKEN, DARK)

  def reset(self, seed: int, steer: str | None = None) -> tuple[Spec, str]:
    steer = self.resolve_steer(seed, steer)
    self._w = _build_world(seed, steer)
    first = _render(self._w, "")
    spec = Spec(initial_state=first,
                task=_task_text(random.Random(f"household/{seed}/task"), self._w),
                tools=(), rules=_rules(self._w), steer=steer)
    return spec, first

  # ---- stepping

  def step(self, action: str) -> StepResult:
    w = self._w
    try:
      verb, args = _parse(action)
      msg, mentions, extra = getattr(self, f"_do_{verb}")(*args)
      valid = True
    except _Fail as fail:
      msg, mentions, extra, valid = fail.msg, fail.mentions, {}, False
    done_n, total = _progress(w)
    success = valid and done_n == total
    if success:
      msg += " Task complete."
    return StepResult(_render(w, msg), 1.0 if success else 0.0, success,
                      self._checks(mentions, extra, valid), valid,
                      {"success": success} if success else {})

  def _checks(self, mentions: tuple[str, ...], extra: Mapping[str, str], valid: bool) -> Checks:
    """Facts from the hidden state: status values, named objects, hidden objects."""
    w = self._w
    shown = set(_visible(w)) | set(mentions) | ({w.held} if w.held else set())
    include = sorted(shown) + ([] if valid else ["Error:"])
    exclude = [n for n in sorted(w.objs) if n not in shown] + (["Error:"] if valid else [])
    return Checks(tuple(include), tuple(exclude), {**_status(w), **extra})

  def _rec(self, name: str) -> _Rec:
    if name in self._w.recs:
      return self._w.recs[name]
    if name in self._w.objs:
      raise _Fail(f"Error: the {name} is not furniture.", (name,))
    raise _Fail("Error: there is no such furniture.")

  def _obj(self, name: str) -> _Obj:
    if name in self._w.objs:
      return self._w.objs[name]
    raise _Fail("Error: there is no such object.")

  def _at(self, rec: _Rec) -> None:
    if self._w.at != rec.name:
      raise _Fail(f"Error: you are not at the {rec.name}.")

  def _do_look(self):
    return "", (), {}

  def _do_inventory(self):
    held = self._w.held
    return (f"You are carrying the {held}." if held else "You are carrying nothing."), (), {}

  def _do_go(self, place: str):
    w = self._w
    if place in w.rooms:
      if place == w.room:
        if w.at is None:
          raise _Fail(f"Error: you are already in the {place}.")
        msg = f"You step back into the {place}."
      elif place in w.exits[w.room]:
        msg = f"You walk to the {place}."
      else:
        raise _Fail(f"Error: the {place} is not an exit of the {w.room}.")
      w.room, w.at, w.lit = place, None, None
      return msg, (), {}
    if place not in w.recs and place not in w.objs:
      raise _Fail("Error: there is no such place.")
    rec = self._rec(place)
    if rec.room != w.room:
      raise _Fail(f"Error: the {rec.name} is not in the {w.room}.")
    if w.at == rec.name:
      raise _Fail(f"Error: you are already at the {rec.name}.")
    w.at, w.lit = rec.name, None
    return f"You go to the {rec.name}.", (), {}

  def _openable(self, name: str) -> _Rec:
    rec = self._rec(name)
    if not rec.openable:
      raise _Fail(f"Error: the {rec.name} cannot be opened or closed.")
    self._at(rec)
    return rec

  def _do_open(self, name: str):
    rec = self._openable(name)
    if rec.is_open:
      raise _Fail(f"Error: the {rec.name} is already open.")
    if self._w.steer != STICKY:
      rec.is_open = True
      return f"You open the {rec.name}.", (), {}
    rec.tries += 1
    if rec.tries < 2:
      return f"The {rec.name} sticks and stays shut (tries: 1/2).", (), {"tries": "1/2"}
    rec.tries, rec.is_open = 0, True
    return f"You open the {rec.name} (tries: 2/2).", (), {"tries": "2/2"}

  def _do_close(self, name: str):
    rec = self._openable(name)
    if not rec.is_open:
      raise _Fail(f"Error: the {rec.name} is already closed.")
    rec.is_open = False
    return f"You close the {rec.name}.", (), {}

  def _do_examine(self, name: str):
    w = self._w
    if name in w.objs:
      if name != w.held and name not in _visible(w):
        raise _Fail(f"Error: you don't see the {name} here.", (name,))
      cond = _condition(w.objs[name])
      return f"You examine the {name} (condition: {cond}).", (name,), {"condition": cond}
    rec = self._rec(name)
    self._at(rec)
    w.lit = rec.name
    return f"You examine the {rec.name}.", (), {}

  def _do_take(self, obj: str, place: str):
    w = self._w
    o, rec = self._obj(obj), self._rec(place)
    if w.held:
      raise _Fail(f"Error: you are already holding the {w.held}.", (w.held,))
    self._at(rec)
    if rec.openable and not rec.is_open:
      raise _Fail(f"Error: the {rec.name} is closed.")
    if o.name not in _visible(w):
      raise _Fail(f"Error: you don't see the {o.name} {rec.prep} the {rec.name}.", (o.name,))
    rec.contents.remove(o.name)
    w.held = o.name
    return f"You take the {o.name} from the {rec.name}.", (o.name,), {}

  def _do_put(self, obj: str, place: str):
    w = self._w
    o, rec = self._obj(obj), self._rec(place)
    if w.held != o.name:
      raise _Fail(f"Error: you are not holding the {o.name}.", (o.name,))
    self._at(rec)
    if rec.openable and not rec.is_open:
      raise _Fail(f"Error: the {rec.name} is closed.")
    rec.contents.append(o.name)
    w.held = None
    return f"You put the {o.name} {rec.prep} the {rec.name}.", (o.name,), {}

  def _treat(self, verb: str, obj: str, device: str):
    """heat / cool / clean: checks in a fixed order so a wrong device always fails."""
    w = self._w
    o, rec = self._obj(obj), self._rec(device)
    if _DEVICE_VERB.get(rec.name) != verb:
      raise _Fail(f"Error: you cannot {verb} things with the {rec.name}.")
    if w.held != o.name:
      raise _Fail(f"Error: you are not holding the {o.name}.", (o.name,))
    self._at(rec)
    if o.kind not in _CAN[verb]:
      raise _Fail(f"Error: the {o.name} cannot be {_PARTICIPLE[verb]}.", (o.name,))
    if rec.name == "microwave" and w.steer == BROKEN:
      raise _Fail(f"Error: the microwave is broken; the {o.name} is not heated.", (o.name,))
    if verb == "clean":
      o.clean = True
    else:
      o.temp = _RESULT[verb]
    return f"You {verb} the {o.name} with the {rec.name}.", (o.name,), {}

  def _do_heat(self, obj: str, device: str):
    return self._treat("heat", obj, device)

  def _do_cool(self, obj: str, device: str):
    return self._treat("cool", obj, device)

  def _do_clean(self, obj: str, device: str):
    return self._treat("clean", obj, device)

  # ---- policies

  def expert_action(self) -> str:
    """Replans from the hidden state: treat and place what is held, else fetch."""
    w, t = self._w, self._w.task
    if w.held is None:
      return self._fetch(self._candidate())
    o = w.objs[w.held]
    if o.kind != t.otype:
      return self._drop(o.name)
    if not _has(o, t.need):
      verb = {"hot": "heat", "cold": "cool", "clean": "clean"}[t.need]
      device = {"heat": "stove" if w.steer == BROKEN else "microwave",
                "cool": "fridge", "clean": "sink basin"}[verb]
      return self._walk(device) or f"{verb} {o.name} with {device}"
    rec = w.recs[t.target]
    return self._walk(rec.name) or self._unlock(rec) or f"put {o.name} {rec.prep} {rec.name}"

  def _candidate(self) -> str:
    """The task object to fetch: not already done, treated first, then nearest."""
    w, t = self._w, self._w.task
    dist = _distances(w, w.room)
    target = w.recs[t.target].contents
    order = list(w.recs)
    best = []
    for o in w.objs.values():
      where = _location(w, o.name)
      if o.kind != t.otype or (o.name in target and _has(o, t.need)):
        continue
      best.append((not _has(o, t.need), dist[w.recs[where].room], order.index(where), o.name))
    return min(best)[-1]

  def _fetch(self, obj: str) -> str:
    w = self._w
    rec = w.recs[_location(w, obj)]
    look = f"examine {rec.name}" if w.steer == DARK and w.lit != rec.name else ""
    return self._walk(rec.name) or self._unlock(rec) or look or f"take {obj} from {rec.name}"

  def _drop(self, obj: str) -> str:
    """Puts a useless held object down where the agent stands (or nearby)."""
    w = self._w
    here = w.recs[w.at] if w.at else next(r for r in w.recs.values() if r.room == w.room)
    return self._walk(here.name) or self._unlock(here) or f"put {obj} {here.prep} {here.name}"

  def _walk(self, rec_name: str) -> str:
    """The next move towards furniture, or "" when the agent stands at it."""
    w = self._w
    room = w.recs[rec_name].room
    if room != w.room:
      dist = _distances(w, room)
      return f"go to {min(w.exits[w.room], key=lambda e: (dist[e], w.rooms.index(e)))}"
    return "" if w.at == rec_name else f"go to {rec_name}"

  @staticmethod
  def _unlock(rec: _Rec) -> str:
    return f"open {rec.name}" if rec.openable and not rec.is_open else ""

  def random_action(self, rng: random.Random) -> str:
    """A plausible command over this house's names, biased towards where the agent is."""
    w = self._w
    here = [r for r in w.recs if w.recs[r].room == w.room]
    anywhere = here if rng.random() < 0.7 else list(w.recs)
    rec = w.at if w.at and rng.random() < 0.5 else rng.choice(anywhere)
    visible = _visible(w)
    obj = rng.choice(visible) if visible and rng.random() < 0.7 else rng.choice(sorted(w.objs))
    held = w.held or obj
    verb = rng.choice(("heat", "cool", "clean"))
    options = (
        "look", "inventory", f"go to {rng.choice(w.rooms + here)}", f"open {rec}",
        f"close {rec}", f"take {obj} from {rec}", f"put {held} in {rec}",
        f"{verb} {held} with {rng.choice(_APPLIANCES)}", f"examine {rng.choice((rec, obj))}",
    )
    return rng.choice(options)

  def invalid_action(self, rng: random.Random) -> str:
    """A command that fails in any state: bogus names, missing arguments, wrong device."""
    w = self._w
    rec = rng.choice(list(w.recs))
    obj = rng.choice(sorted(w.objs))
    options = (
        f"take {rng.choice(_BOGUS_THINGS)} from {rec}", f"go to {rng.choice(_BOGUS_PLACES)}",
        rng.choice(_GIBBERISH), f"heat {obj} with fridge", f"open {obj}",
        f"put {obj} in {rng.choice(_BOGUS_PLACES)}",
    )
    return rng.choice(options)

  # ---- checking

  @staticmethod
  def state_check(spec: Spec, step: Step, prediction: str) -> float:
    """Checked facts plus consistency of the status line with the view above it."""
    if not isinstance(prediction, str):
      return 0.0
    checks = step.checks
    status = _parse_status(prediction)
    results = [status is not None]
    status = status or {}
    for key, value in checks.fields.items():
      if key in _STATUS_KEYS:
        results.append(_norm(status.get(key, "")) == _norm(value))
      else:
        results.append(generic.states_field(prediction, key, value))
    low = prediction.lower()
    results += [s.lower() in low for s in checks.must_include]
    # Absent text trivially excludes everything: one sub-check for all exclusions
    # keeps garbage from scoring well on them.
    if checks.must_exclude:
      results.append(all(s.lower() not in low for s in checks.must_exclude))
    results += _consistency(prediction, status)
    return sum(results) / len(results)


# --------------------------------------------------------------------------
# Parsing predicted next states.

_STATUS_KEYS = ("room", "at", "holding", "state", "open", "visible", "progress",
                "microwave", "doors", "lights")
_STATUS = re.compile(r"\[([^\[\]]*)\]\s*$")
_VIEW = re.compile(
    r"You are in the (?P<room>[a-z ]+)\. Furniture: [^.]*\. Exits: [^.]*\."
    r"|(?:In|On) the (?P<lrec>[a-z0-9 ]+?) you see: (?P<items>[^.]*)\."
    r"|The (?P<crec>[a-z0-9 ]+?) is closed\."
    r"|It is too dark to see what is (?:in|on) the (?P<drec>[a-z0-9 ]+?)\.")
_PROGRESS = re.compile(r"^(\d+)/(\d+)$")


def _norm(value: str) -> str:
  return " ".join(str(value).lower().split())


def _parse_status(text: str) -> dict[str, str] | None:
  """The trailing `[key: value | ...]` line as a dict; None when absent or malformed."""
  m = _STATUS.search(text)
  if not m:
    return None
  out = {}
  for part in m.group(1).split(" | "):
    key, sep, value = part.partition(": ")
    if not sep:
      return None
    out[key.strip()] = value.strip()
  return out


def _consistency(text: str, status: dict[str, str]) -> list[bool]:
  """Internal checks: the view agrees with at / visible / holding / open / progress."""
  if not status:
    return [False] * 5
  views = list(_VIEW.finditer(text))
  view = views[-1] if views else None
  items = []
  if view is not None and view.group("lrec") is not None and view.group("items") != "nothing":
    items = [_norm(s) for s in view.group("items").split(",")]
  place = None
  if view is not None:
    place = "center" if view.group("room") else (view.group("lrec") or view.group("crec")
                                                 or view.group("drec"))
  room_ok = view is None or not view.group("room") or _norm(view.group("room")) == _norm(
      status.get("room", ""))
  holding = _norm(status.get("holding", ""))
  opened = [_norm(s) for s in status.get("open", "").split(",")]
  closed_ok = view is None or not view.group("crec") or _norm(view.group("crec")) not in opened
  prog = _PROGRESS.match(status.get("progress", ""))
  return [
      status.get("visible", "") == str(len(items)),
      place is not None and _norm(place) == _norm(status.get("at", "")) and room_ok,
      holding not in items and (holding == "nothing") == (_norm(status.get("state", "")) == "none"),
      closed_ok,
      prog is not None and int(prog.group(1)) <= int(prog.group(2)),
  ]
