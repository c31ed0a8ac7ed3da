"""Household: an ALFWorld-like home where an agent moves objects between furniture.

World. 2-4 rooms (the kitchen plus some of living room, bedroom, bathroom,
study) joined as a random tree: from a room you can walk only to its exits.
Each room holds furniture ("receptacles"): the kitchen always has a fridge, a
microwave, a stove and a sink basin; other pieces are drawn per room, and
cabinets, drawers and shelves are numbered across the house (`cabinet 2`).
Some furniture opens and closes; a closed one hides its contents. Objects
(apple, mug, knife, book, ...) lie in or on the furniture. Hidden state: where
every object is, which containers are open, the temperature (hot/cold) and
cleanliness of every object, what the agent holds (one object at most), and
the steer's counters.

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
is the trailing anchor:
  [room: kitchen | at: fridge | holding: apple | state: cold | open: fridge,
   drawer 1 | visible: 2 | progress: 1/2]
`open` lists the open containers of the rooms visited so far, `visible`
counts the objects listed in the view, `state` is the held object's condition.

Hidden and revealed. Reset fixes what the task and the expert need: the rooms
and their exits, the kitchen's appliances, the task's target and the pieces of
furniture that hold the task's objects. Everything else is drawn lazily, when
it is first shown, from a stream keyed by (seed, hidden stream, what): a
room's other furniture and which containers start open (on the first visit),
and the other objects in or on a piece of furniture (on the first look into
it). `fork_hidden` switches the stream, so a twin world keeps what was shown
and re-draws the rest. A step that shows a room for the first time marks
`open` as revealed (its furniture and exits are revealed too); a first look
into a piece marks `visible` and the objects never seen before as revealed.
The checker then demands only what a model given the spec, s_t and a_t can
know, plus rules the invented content must obey: furniture the room allows,
exits that lead back, objects of the world's kinds, a count that matches the
list, a status line that agrees with the view. Names are judged by their form,
never by whether a hidden piece exists (`go to cabinet 7` elsewhere: "not in
the kitchen"), so error messages reveal nothing.

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
from mdlm_wm.checks.result import FORMAT, CheckResult, parse_status_line
from mdlm_wm.data.schema import Checks, Spec, Step
from mdlm_wm.envs.base import Env, StepResult

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


# The stream lazily drawn facts come from until `fork_hidden` switches it.
WORLD_STREAM = "world"
# How many other objects a piece of furniture holds when first looked into.
_EXTRA_COUNTS = (0, 1, 2, 3)
_EXTRA_WEIGHTS = (40, 35, 18, 7)
# Chance that a container starts open (drawn on the room's first visit).
_OPEN_CHANCE = 0.2


@dataclasses.dataclass
class _Rec:
  name: str
  kind: str
  room: str
  prep: str
  openable: bool
  is_open: bool = False  # drawn on the room's first visit.
  contents: list[str] = dataclasses.field(default_factory=list)
  # Task objects placed at reset, joined to `contents` on the first look.
  hidden: list[str] = dataclasses.field(default_factory=list)
  drawn: bool = False  # contents shown (and the other objects drawn) once.
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
  seed: int
  rooms: list[str]
  exits: dict[str, list[str]]
  # Pieces known to exist: from reset the reserved ones (appliances, the
  # target, the task objects' places), the rest once their room is shown.
  recs: dict[str, _Rec]
  objs: dict[str, _Obj]  # task objects from reset, the others once shown.
  task: _Task
  steer: str
  room: str
  stream: str = WORLD_STREAM
  # Rooms shown so far (in visit order) -> their furniture in view order.
  furniture: dict[str, list[str]] = dataclasses.field(default_factory=dict)
  seen: set[str] = dataclasses.field(default_factory=set)  # objects ever listed.
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
# Names: judged by their form, so that an answer never depends on hidden pieces.


def _furniture_kind(name: str) -> str | None:
  """The kind of a furniture name (`sofa`, `cabinet 3`), or None."""
  kind, _, number = name.rpartition(" ")
  if kind in _NUMBERED:
    return kind if number.isdigit() and not number.startswith("0") else None
  return name if name in _FURNITURE and name not in _NUMBERED else None


def _object_kind(name: str) -> str | None:
  """The kind of an object name (`apple`, `apple 2`), or None."""
  if name in _KINDS:
    return name
  kind, _, number = name.rpartition(" ")
  return kind if kind in _KINDS and number.isdigit() and not number.startswith("0") else None


def _opens(name: str) -> bool:
  """Whether a furniture name is of a kind that opens and closes."""
  kind = _furniture_kind(name)
  return kind is not None and _FURNITURE[kind][1]


def _room_kinds(room: str) -> list[str]:
  """Furniture kinds a room allows (the kitchen's appliances first)."""
  fixed = list(_KITCHEN_FIXED) if room == "kitchen" else []
  return fixed + list(dict.fromkeys(_ROOM_CHOICES[room]))


# --------------------------------------------------------------------------
# World generation: what reset fixes.


def _build_world(seed: int, steer: str) -> _World:
  """Rooms, exits, the task and the places of its objects; the steer never
  affects them. Everything else is drawn when first shown (_reveal)."""
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
  recs = {k: _new_rec(k, k, "kitchen") for k in _KITCHEN_FIXED}
  task = _draw_task(rng, rooms, recs)
  objs = _place_task_objects(rng, rooms, recs, task)
  w = _World(seed, rooms, exits, recs, objs, task, steer, room=rng.choice(rooms))
  _reveal(w)
  return w


def _new_rec(name: str, kind: str, room: str) -> _Rec:
  prep, openable = _FURNITURE[kind]
  return _Rec(name, kind, room, prep, openable)


def _reserve(rng: random.Random, recs: dict[str, _Rec], kind: str, room: str) -> _Rec:
  """The room's reserved piece of `kind`, made (with a free number) if new."""
  for rec in recs.values():
    if rec.kind == kind and rec.room == room:
      return rec
  name = kind
  if kind in _NUMBERED:
    free = [n for n in range(1, 6) if f"{kind} {n}" not in recs]
    name = f"{kind} {rng.choice(free[:3])}"
  recs[name] = _new_rec(name, kind, room)
  return recs[name]


def _draw_task(rng: random.Random, rooms: list[str], recs: dict[str, _Rec]) -> _Task:
  kind = rng.choice(_TASK_KINDS)
  if kind in _CAN:
    otype = rng.choice(_CAN[kind])
  elif kind == "two":
    otype = rng.choice(sorted(_PLURAL))
  else:
    otype = rng.choice(_KINDS)
  room = rng.choice(rooms)
  target = _reserve(rng, recs, rng.choice(sorted(set(_ROOM_CHOICES[room]))), room)
  return _Task(kind, otype, target.name, 2 if kind == "two" else 1, _RESULT.get(kind, ""))


def _place_task_objects(rng: random.Random, rooms: list[str], recs: dict[str, _Rec],
                        task: _Task) -> dict[str, _Obj]:
  """1-3 objects of the task's type, hidden in reserved pieces, never on the target."""
  n_task = rng.randint(2, 3) if task.kind == "two" else rng.randint(1, 2)
  names = [task.otype] if n_task == 1 else [f"{task.otype} {i}" for i in range(1, n_task + 1)]
  target = recs[task.target]
  for name in names:
    room = rng.choice(rooms)
    kinds = [k for k in _room_kinds(room) if (k, room) != (target.kind, target.room)]
    _reserve(rng, recs, rng.choice(kinds), room).hidden.append(name)
  return {n: _Obj(n, task.otype) for n in names}


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
      "rooms visited so far, visible objects and task progress.",
  ]
  if w.steer:
    rules.append(f"Steer: {w.steer}")
  return tuple(rules)


# --------------------------------------------------------------------------
# Lazy draws: what the world shows for the first time.


def _hidden_rng(w: _World, what: str) -> random.Random:
  return random.Random(f"household/{w.seed}/{w.stream}/{what}")


def _reveal(w: _World) -> tuple[bool, bool]:
  """Draws what the agent now sees for the first time: (a new room, a first
  look into the piece it stands at)."""
  new_room = w.room not in w.furniture
  if new_room:
    _reveal_room(w, w.room)
  rec = w.recs[w.at] if w.at else None
  first_look = rec is not None and not rec.drawn and _sees_into(w, rec)
  if first_look:
    _reveal_contents(w, rec)
  return new_room, first_look


def _reveal_room(w: _World, room: str) -> None:
  """The room's furniture around its reserved pieces, and which containers are open."""
  rng = _hidden_rng(w, f"room/{room}")
  fixed = list(_KITCHEN_FIXED) if room == "kitchen" else []
  reserved = [r.name for r in w.recs.values() if r.room == room and r.name not in fixed]
  choices = list(_ROOM_CHOICES[room])
  for name in reserved:
    choices.remove(w.recs[name].kind)
  wanted = rng.randint(1, 3) if room == "kitchen" else rng.randint(2, 4)
  kinds = rng.sample(choices, max(0, wanted - len(reserved)))
  order: list[tuple[str, bool]] = [(n, True) for n in reserved] + [(k, False) for k in kinds]
  rng.shuffle(order)
  names = fixed + [n if is_reserved else _add_piece(w, n, room) for n, is_reserved in order]
  for name in names:
    rec = w.recs[name]
    rec.is_open = rec.openable and rng.random() < _OPEN_CHANCE
  w.furniture[room] = names


def _add_piece(w: _World, kind: str, room: str) -> str:
  """A new piece of `kind`; numbered kinds take the lowest number not in use."""
  name, n = kind, 1
  if kind in _NUMBERED:
    while f"{kind} {n}" in w.recs:
      n += 1
    name = f"{kind} {n}"
  w.recs[name] = _new_rec(name, kind, room)
  return name


def _reveal_contents(w: _World, rec: _Rec) -> None:
  """The task objects placed here at reset plus 0-3 other objects of kinds
  not yet in the world, in a drawn order, before whatever the agent put here."""
  rng = _hidden_rng(w, f"contents/{rec.name}")
  pool = [k for k in _KINDS if k != w.task.otype and k not in w.objs]
  count = min(len(pool), rng.choices(_EXTRA_COUNTS, _EXTRA_WEIGHTS)[0])
  extra = rng.sample(pool, count)
  for kind in extra:
    w.objs[kind] = _Obj(kind, kind)
  found = rec.hidden + extra
  rng.shuffle(found)
  rec.contents, rec.hidden, rec.drawn = found + rec.contents, [], True


# --------------------------------------------------------------------------
# Hidden-state queries.


def _condition(o: _Obj) -> str:
  flags = [f for f in (o.temp, "clean" if o.clean else "") if f]
  return ", ".join(flags) or "plain"


def _has(o: _Obj, need: str) -> bool:
  return not need or (o.clean if need == "clean" else o.temp == need)


def _location(w: _World, obj: str) -> str | None:
  """The furniture holding `obj`, shown or not; None while the agent holds it."""
  for rec in w.recs.values():
    if obj in rec.contents or obj in rec.hidden:
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
  opened = [n for names in w.furniture.values() for n in names
            if w.recs[n].openable and w.recs[n].is_open]
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
    furniture = ", ".join(w.furniture[w.room])
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

  def fork_hidden(self, stream: str) -> None:
    self._w.stream = stream

  # ---- stepping

  def step(self, action: str) -> StepResult:
    w = self._w
    try:
      verb, args = _parse(action)
      msg, mentions, extra = getattr(self, f"_do_{verb}")(*args)
      valid = True
    except _Fail as fail:
      msg, mentions, extra, valid = fail.msg, fail.mentions, {}, False
    new_room, first_look = _reveal(w)
    done_n, total = _progress(w)
    success = valid and done_n == total
    if success:
      msg += " Task complete."
    checks = self._checks(mentions, extra, valid, new_room, first_look)
    w.seen.update(_visible(w))
    return StepResult(_render(w, msg), 1.0 if success else 0.0, success, checks, valid,
                      {"success": success} if success else {})

  def _checks(self, mentions: tuple[str, ...], extra: Mapping[str, str], valid: bool,
              new_room: bool, first_look: bool) -> Checks:
    """Facts of the next state: status values, the objects it shows (those
    never listed before revealed) and the known objects it does not show. A
    first look may list anything not seen elsewhere, so only objects seen
    before are excluded then."""
    w = self._w
    listed = _visible(w)
    shown = set(listed) | set(mentions) | ({w.held} if w.held else set())
    error = ["Error:"]
    exclude = [n for n in sorted(w.objs)
               if n not in shown and (n in w.seen or not first_look)]
    revealed = [n for n in sorted(listed) if n not in w.seen] if first_look else []
    revealed += (["open"] if new_room else []) + (["visible"] if first_look else [])
    return Checks(tuple(sorted(shown) + ([] if valid else error)),
                  tuple(exclude + (error if valid else [])),
                  {**_status(w), **extra}, tuple(revealed))

  def _place(self, name: str) -> str:
    """A furniture name's kind; object names and other words fail."""
    kind = _furniture_kind(name)
    if kind is not None:
      return kind
    if _object_kind(name):
      raise _Fail(f"Error: the {name} is not furniture.", (name,))
    raise _Fail("Error: there is no such furniture.")

  @staticmethod
  def _thing(name: str) -> str:
    """An object name as given; other words fail."""
    if _object_kind(name) is None:
      raise _Fail("Error: there is no such object.")
    return name

  def _at(self, name: str) -> _Rec:
    """The piece the agent stands at, which must be `name`."""
    if self._w.at != name:
      raise _Fail(f"Error: you are not at the {name}.")
    return self._w.recs[name]

  def _do_look(self):
    return "", (), {}

  def _do_inventory(self):
    held = self._w.held
    return (f"You are carrying the {held}." if held else "You are carrying nothing."), (), {}

  def _do_go(self, place: str):
    w = self._w
    if place in _ROOM_CHOICES:
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
    if _furniture_kind(place) is None and _object_kind(place) is None:
      raise _Fail("Error: there is no such place.")
    self._place(place)
    if place not in w.furniture[w.room]:
      raise _Fail(f"Error: the {place} is not in the {w.room}.")
    if w.at == place:
      raise _Fail(f"Error: you are already at the {place}.")
    w.at, w.lit = place, None
    return f"You go to the {place}.", (), {}

  def _openable(self, name: str) -> _Rec:
    if not _FURNITURE[self._place(name)][1]:
      raise _Fail(f"Error: the {name} cannot be opened or closed.")
    return self._at(name)

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
    if _object_kind(name):
      if name != w.held and name not in _visible(w):
        raise _Fail(f"Error: you don't see the {name} here.", (name,))
      cond = _condition(w.objs[name])
      return f"You examine the {name} (condition: {cond}).", (name,), {"condition": cond}
    self._place(name)
    rec = self._at(name)
    w.lit = rec.name
    return f"You examine the {rec.name}.", (), {}

  def _do_take(self, obj: str, place: str):
    w = self._w
    obj, kind = self._thing(obj), self._place(place)
    if w.held:
      raise _Fail(f"Error: you are already holding the {w.held}.", (w.held,))
    rec = self._at(place)
    if rec.openable and not rec.is_open:
      raise _Fail(f"Error: the {rec.name} is closed.")
    if obj not in _visible(w):
      raise _Fail(f"Error: you don't see the {obj} {_FURNITURE[kind][0]} the {place}.", (obj,))
    rec.contents.remove(obj)
    w.held = obj
    return f"You take the {obj} from the {rec.name}.", (obj,), {}

  def _do_put(self, obj: str, place: str):
    w = self._w
    obj = self._thing(obj)
    self._place(place)
    if w.held != obj:
      raise _Fail(f"Error: you are not holding the {obj}.", (obj,))
    rec = self._at(place)
    if rec.openable and not rec.is_open:
      raise _Fail(f"Error: the {rec.name} is closed.")
    rec.contents.append(obj)
    w.held = None
    return f"You put the {obj} {rec.prep} the {rec.name}.", (obj,), {}

  def _treat(self, verb: str, obj: str, device: str):
    """heat / cool / clean: checks in a fixed order so a wrong device always fails."""
    w = self._w
    obj = self._thing(obj)
    self._place(device)
    if _DEVICE_VERB.get(device) != verb:
      raise _Fail(f"Error: you cannot {verb} things with the {device}.")
    if w.held != obj:
      raise _Fail(f"Error: you are not holding the {obj}.", (obj,))
    rec = self._at(device)
    o = w.objs[obj]
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
    here = w.recs[w.at or w.furniture[w.room][0]]
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

  def _shown_pieces(self) -> list[str]:
    return [n for names in self._w.furniture.values() for n in names]

  def random_action(self, rng: random.Random) -> str:
    """A plausible command over the names shown so far, biased towards where the agent is."""
    w = self._w
    here = w.furniture[w.room]
    anywhere = here if rng.random() < 0.7 else self._shown_pieces()
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
    rec = rng.choice(self._shown_pieces())
    obj = rng.choice(sorted(w.objs))
    options = (
        f"take {rng.choice(_BOGUS_THINGS)} from {rec}", f"go to {rng.choice(_BOGUS_PLACES)}",
        rng.choice(_GIBBERISH), f"heat {obj} with fridge", f"open {obj}",
        f"put {obj} in {rng.choice(_BOGUS_PLACES)}",
    )
    return rng.choice(options)

  # ---- checking

  @classmethod
  def check(cls, spec: Spec, step: Step, prediction: str) -> CheckResult:
    return _check(step, prediction if isinstance(prediction, str) else "")


# --------------------------------------------------------------------------
# Checking predicted next states.

_STATUS_KEYS = ("room", "at", "holding", "state", "open", "visible", "progress",
                "microwave", "doors", "lights")
_VIEW = re.compile(
    r"You are in the (?P<room>[a-z ]+)\. Furniture: (?P<furniture>[^.]*)\. "
    r"Exits: (?P<exits>[^.]*)\."
    r"|(?:In|On) the (?P<lrec>[a-z0-9 ]+?) you see: (?P<items>[^.]*)\."
    r"|The (?P<crec>[a-z0-9 ]+?) is closed\."
    r"|It is too dark to see what is (?:in|on) the (?P<drec>[a-z0-9 ]+?)\.")
_PROGRESS = re.compile(r"^(\d+)/(\d+)$")
# Rules every predicted state obeys, named as CheckResult reports them.
_CONSISTENCY = ("visible_matches_view", "view_matches_status", "holding_consistent",
                "open_matches_view", "progress_form")


@dataclasses.dataclass(frozen=True)
class _View:
  kind: str  # "room", "listing", "closed" or "dark".
  place: str  # the room of a room view, else the piece of furniture.
  message: str  # the text before the view: what the action did.
  furniture: tuple[str, ...] = ()
  exits: tuple[str, ...] = ()
  items: tuple[str, ...] = ()


def _norm(value: str) -> str:
  return " ".join(str(value).lower().split())


def _names(text: str, empty: str) -> tuple[str, ...]:
  """`a, b, c` as normalized names; `empty` (e.g. "nothing") as none."""
  text = _norm(text)
  return () if text in (empty, "") else tuple(_norm(s) for s in text.split(","))


def _parse_view(text: str) -> _View | None:
  """The last view sentence of a state, or None."""
  views = list(_VIEW.finditer(text))
  if not views:
    return None
  m = views[-1]
  message = _norm(text[:m.start()])
  if m.group("room"):
    return _View("room", _norm(m.group("room")), message, _names(m.group("furniture"), "none"),
                 _names(m.group("exits"), "none"))
  if m.group("lrec"):
    return _View("listing", _norm(m.group("lrec")), message,
                 items=_names(m.group("items"), "nothing"))
  if m.group("crec"):
    return _View("closed", _norm(m.group("crec")), message)
  return _View("dark", _norm(m.group("drec")), message)


def _check(step: Step, prediction: str) -> CheckResult:
  """Determined facts (status values, shown and excluded objects, the message,
  the kind of view, and what it lists unless it is shown for the first time), revealed
  facts (reported only), and rules on the prediction's content (_consistency,
  plus _room_rules / _listing_rules for what is shown for the first time)."""
  checks = step.checks
  status = parse_status_line(prediction)
  view = _parse_view(prediction)
  ref = _parse_view(step.next_state)
  new_room = checks.is_revealed_field("open")
  first_look = checks.is_revealed_field("visible")
  determined = {FORMAT: status is not None and view is not None}
  revealed: dict[str, bool] = {}
  for key, value in checks.fields.items():
    if key == "open":  # which containers are open, in any order.
      ok = status is not None and set(_names(status.get(key, ""), "none")) == set(
          _names(value, "none"))
    elif key in _STATUS_KEYS:
      ok = status is not None and _norm(status.get(key, "")) == _norm(value)
    else:
      ok = generic.states_field(prediction, key, value)
    (revealed if checks.is_revealed_field(key) else determined)[f"field:{key}"] = ok
  mentions = generic.fact_entries(checks, prediction)
  determined.update(mentions.determined)
  revealed.update(mentions.revealed)
  if ref is not None:
    # Messages never depend on hidden draws: names are judged by their form.
    determined["message"] = view is not None and view.message == ref.message
    determined["view"] = view is not None and (view.kind, view.place) == (ref.kind, ref.place)
    same_kind = view is not None and view.kind == ref.kind
    if ref.kind == "room":
      (revealed if new_room else determined).update({
          "view:furniture": same_kind and set(view.furniture) == set(ref.furniture),
          "view:exits": same_kind and set(view.exits) == set(ref.exits)})
    if ref.kind == "listing":
      (revealed if first_look else determined)["view:items"] = (
          same_kind and set(view.items) == set(ref.items))
  constraints = _consistency(view, status)
  if new_room:
    constraints.update(_room_rules(view, status, parse_status_line(step.state) or {}))
  if first_look:
    constraints.update(_listing_rules(view))
  return CheckResult(determined, revealed, constraints)


def _consistency(view: _View | None, status: dict[str, str] | None) -> dict[str, bool]:
  """The view agrees with at / room / visible / holding / open / progress."""
  if status is None or view is None:
    # Nothing is consistent without both (no vacuous passes on garbage).
    return dict.fromkeys(_CONSISTENCY, False)
  place = "center" if view.kind == "room" else view.place
  holding = _norm(status.get("holding", ""))
  opened = _names(status.get("open", ""), "none")
  prog = _PROGRESS.match(status.get("progress", ""))
  return {
      "visible_matches_view": status.get("visible", "") == str(len(view.items)),
      "view_matches_status": place == _norm(status.get("at", "")) and (
          view.kind != "room" or view.place == _norm(status.get("room", ""))),
      "holding_consistent": holding not in view.items and (holding == "nothing") == (
          _norm(status.get("state", "")) == "none"),
      # A closed piece is not open; one the agent sees into is open if it opens.
      "open_matches_view": (view.place not in opened if view.kind == "closed"
                            else view.kind == "room" or not _opens(view.place)
                            or view.place in opened),
      "progress_form": prog is not None and int(prog.group(1)) <= int(prog.group(2)),
  }


def _room_rules(view: _View | None, status: dict[str, str] | None,
                before: dict[str, str]) -> dict[str, bool]:
  """A room shown for the first time: furniture the room allows (the kitchen's
  appliances included), exits to other rooms that lead back to the room the
  agent came from, and open containers that add only this room's ones."""
  room = view.place if view is not None and view.kind == "room" else ""
  if room not in _ROOM_CHOICES or status is None:
    return {"furniture_allowed": False, "exits_allowed": False, "open_extends_previous": False}
  kinds = [_furniture_kind(n) for n in view.furniture]
  came_from = _norm(before.get("room", ""))
  previous = _names(before.get("open", ""), "none")
  opened = _names(status.get("open", ""), "none")
  added = [n for n in opened if n not in previous]
  return {
      "furniture_allowed": bool(kinds) and len(set(view.furniture)) == len(kinds)
                           and all(k in _room_kinds(room) for k in kinds)
                           and (room != "kitchen" or set(_KITCHEN_FIXED) <= set(kinds)),
      "exits_allowed": bool(view.exits) and len(set(view.exits)) == len(view.exits)
                       and all(e in _ROOM_CHOICES and e != room for e in view.exits)
                       and came_from in view.exits,
      "open_extends_previous": set(previous) <= set(opened) and all(
          n in view.furniture and _opens(n) for n in added),
  }


def _listing_rules(view: _View | None) -> dict[str, bool]:
  """A first look: the listed things are objects of the world's kinds, each once."""
  items = view.items if view is not None and view.kind == "listing" else None
  return {"items_are_objects": items is not None and len(set(items)) == len(items)
                               and all(_object_kind(i) for i in items)}
