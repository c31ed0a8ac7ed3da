"""Lab: a ScienceWorld-like room of substances, containers, heaters and a freezer.

World. One room (lab, kitchen or workshop) with a stove, an oven, a freezer
and a table. 3-6 containers (beaker, bowl, cup, flask, jar, mug, pot) stand on
them; 2-4 of them hold a substance (water, ethanol, oil, butter, chocolate,
gallium, wax, sugar, salt, tin, lead, or a "compound" whose melting point is
drawn per seed). There is a thermometer and, for measuring tasks, two coloured
boxes. Hidden physics: each filled container has one temperature; a substance
is solid at or below its melting point, gas at or above its boiling point and
liquid in between (water is called ice and steam in those states). Every
successful action is one time step: an active stove or oven heats what stands
on it by a fixed rate, the freezer cools by 10C down to -20C, and everything
else drifts 5C toward the room temperature. Pouring joins contents at their
average temperature; only liquids and powders pour. Mixing two substances in
one container follows three recipes (brine, syrup, fudge).

Actions are free text: look, inventory, examine X, pick up X, put X in/on Y,
pour X into Y, activate X, deactivate X, wait, measure temperature of X, mix X
and Y, focus on X. One item can be held; measuring needs the thermometer held.

Tasks: melt / boil / freeze a substance; heat a substance above T or cool it
below T; find whether a melting point is above T and focus on the matching
box (a wrong box fails the episode); mix two substances into a product.

Observation. Every state is `<message>\\n<placement line>\\n<status line>`:
  On the stove: pot; in the oven: nothing; in the freezer: cup; on the table: beaker, thermometer
  [location: lab | holding: nothing | stove: on | oven: off | beaker: empty |
   cup: ice (solid, -20C) | pot: salt (solid, 45C) + water (liquid, 45C) |
   solid: 2 | liquid: 1 | gas: 0 | reading: none | task: open | time: 3]
The status line is the trailing anchor: contents, temperatures, state counts,
the last thermometer reading, the task status and the clock depend on the
whole hidden state and its history.

Hidden and revealed. Everything but one fact is in view from the start: the
status line lists every container's contents, and the melting and boiling
points of the named substances are world constants, so every state of matter
follows from temperatures the rules determine. The one hidden fact is the
compound's melting point. It is drawn lazily: the world keeps only the range
of melting points consistent with every state of the compound shown so far
(and with the measuring task's answer once given), and draws a value from
that range, from a stream keyed by (seed, hidden stream, range), whenever it
is needed. A shown state narrows the range, so the same value comes back until
new information is shown, and `fork_hidden` (the twin world) draws anew within
the same range. A step whose compound state (or box answer) the range left
open marks that container's field, the state counts that could differ (and
`task`) as revealed; the checker then asks only that the invented state be
consistent with the compound's range, the task's threshold and the state s_t
shows.

Steers: a broken stove (activating it does nothing, `stove: broken`; the
expert uses the slower oven), a very cold room (room temperature 5C instead of
20C, visible in every drifting temperature), a thermometer that reads 10
degrees high (`reading` = temperature + 10) and a stove that heats twice as
fast. All keep the task solvable.
"""

from __future__ import annotations

import dataclasses
import random
import re

from mdlm_wm.checks import generic
from mdlm_wm.checks.result import FORMAT, CheckResult, parse_status_line
from mdlm_wm.data.schema import Checks, Spec, Step
from mdlm_wm.envs.base import Env, StepResult

ROOMS = ("lab", "kitchen", "workshop")
CONTAINERS = ("beaker", "bowl", "cup", "flask", "jar", "mug", "pot")
COLORS = ("blue", "green", "orange", "red", "yellow")
THERMOMETER = "thermometer"
PLACES = ("stove", "oven", "freezer", "table")
PLACE_KEYS = {"stove": "on the stove", "oven": "in the oven",
              "freezer": "in the freezer", "table": "on the table"}
PREPOSITION = {"stove": "on", "oven": "in", "freezer": "in", "table": "on"}
HAND = "hand"
STATES = ("solid", "liquid", "gas")
WATER_NAMES = {"solid": "ice", "liquid": "water", "gas": "steam"}

ROOM_TEMP = 20
COLD_ROOM_TEMP = 5
DRIFT = 5
FREEZER_TEMP = -20
FREEZER_RATE = 10
OVEN_RATE = 15
OFFSET = 10


@dataclasses.dataclass(frozen=True)
class Substance:
  melt: int
  boil: int


# Melting points avoid [5, 20] so the cold-room steer never changes a starting
# state of matter (the same seed keeps the same, still unsolved, task).
SUBSTANCES = {
    "water": Substance(0, 100), "ethanol": Substance(-114, 78), "oil": Substance(-6, 300),
    "butter": Substance(35, 250), "chocolate": Substance(45, 280),
    "gallium": Substance(30, 2400), "wax": Substance(60, 370),
    "sugar": Substance(186, 1000), "salt": Substance(801, 1465),
    "tin": Substance(232, 2600), "lead": Substance(327, 1749),
    "brine": Substance(-2, 102), "syrup": Substance(-8, 105), "fudge": Substance(40, 300),
}
COMPOUND = "compound"
# The compound's melting point lies in this inclusive range, never within
# ANSWER_GAP of the measuring task's threshold (so the answer is clear-cut), and
# it boils COMPOUND_BOIL_GAP above it.
COMPOUND_MELT = (25, 299)
ANSWER_GAP = 10
COMPOUND_BOIL_GAP = 1000
# The stream hidden facts are drawn from until `fork_hidden` switches it.
WORLD_STREAM = "world"
POWDERS = ("salt", "sugar")  # solids that still pour
# product -> (ingredient a, ingredient b, ingredients that must be liquid)
RECIPES = {"brine": ("salt", "water", ("water",)), "syrup": ("sugar", "water", ("water",)),
           "fudge": ("chocolate", "butter", ("chocolate", "butter"))}
STARTERS = ("water", "ethanol", "oil", "butter", "chocolate", "gallium", "wax", "sugar",
            "salt", "tin", "lead")
MELTABLE = ("butter", "chocolate", "gallium", "wax", "sugar", "tin", "lead")
BOILABLE = ("water", "ethanol", "oil")
FREEZABLE = ("water", "oil")
# Never part of a world: names for actions that must fail.
GHOSTS = ("spoon", "kettle", "telescope", "sandwich", "magnet")

STEER_BROKEN = "The stove is broken: activating it does nothing."
STEER_COLD = "The room is very cold."
STEER_OFFSET = "The thermometer reads 10 degrees high."
STEER_FAST = "The stove heats twice as fast as usual."
_STEER_RULES = {
    STEER_BROKEN: "Steer: the stove is broken; activating it does nothing and the status shows "
                  "stove: broken. Use the oven to heat.",
    STEER_COLD: f"Steer: the room is very cold ({COLD_ROOM_TEMP}C); everything off the heaters "
                "and out of the freezer drifts toward it.",
    STEER_OFFSET: f"Steer: the thermometer reads {OFFSET} degrees high; every reading is the true "
                  f"temperature plus {OFFSET}.",
    STEER_FAST: "Steer: the stove heats twice as fast as usual.",
}
STATUS_KEYS = ("location", "holding", "stove", "oven", "solid", "liquid", "gas", "reading",
               "task", "time")


class _Fail(Exception):
  """An action that cannot be carried out; its message becomes the error text."""


@dataclasses.dataclass
class _Task:
  kind: str  # melt, boil, freeze, heat, cool, measure, mix
  target: str  # a substance kind, or the product of a mix
  threshold: int = 0
  boxes: tuple[str, ...] = ()  # measure: (box if above, box if not)


@dataclasses.dataclass
class _World:
  room: str
  ambient: int
  stove_rate: int
  offset: int
  stove_broken: bool
  items: tuple[str, ...]  # portable things, sorted
  containers: tuple[str, ...]  # sorted
  places: dict[str, str]  # item -> place or HAND
  contents: dict[str, list[str]]  # container -> substance kinds, in pouring order
  temps: dict[str, int]  # filled container -> temperature
  task: _Task
  # Inclusive range of the compound's melting points consistent with all shown
  # so far (None without a compound); the value itself is drawn lazily.
  compound_melt: tuple[int, int] | None = None
  stove_on: bool = False
  oven_on: bool = False
  reading: int | None = None
  time: int = 0
  status: str = "open"  # open, done, failed
  consumed: list[str] = dataclasses.field(default_factory=list)
  # Set once the target was measured after its answer became evident (expert bookkeeping).
  measured: bool = False


def _toward(value: int, target: int, rate: int) -> int:
  if value > target:
    return max(target, value - rate)
  return min(target, value + rate)


class LabEnv(Env):
  name = "lab"
  max_steps = 40
  steers = (STEER_BROKEN, STEER_COLD, STEER_OFFSET, STEER_FAST)

  def __init__(self):
    self._w: _World | None = None
    self._seed = 0
    self._stream = WORLD_STREAM

  # ------------------------------------------------------------------ reset

  def reset(self, seed: int, steer: str | None = None) -> tuple[Spec, str]:
    steer = self.resolve_steer(seed, steer)
    # The world comes from its own stream so a seed builds the same lab under every steer.
    rng = random.Random(f"{self.name}/{seed}")
    self._w = _build_world(rng, steer)
    self._seed, self._stream = seed, WORLD_STREAM
    self._show_compound()
    obs = self._render(f"You are in the {self._w.room}. A stove, an oven, a freezer and a "
                       "table are here.")
    spec = Spec(initial_state=obs, task=_task_text(self._w), tools=(),
                rules=_rules(self._w, steer), steer=steer)
    return spec, obs

  def fork_hidden(self, stream: str) -> None:
    self._stream = stream

  # ------------------------------------------------------------------- step

  def step(self, action: str) -> StepResult:
    w = self._w
    mentioned = self._names()
    # Substances mixed away in this very step may still be named by its message.
    gone = list(w.consumed)
    possible = self._possible_melts()
    was_open = w.status == "open"
    try:
      message = self._apply(action)
    except _Fail as e:
      # Nothing changed: the compound's state stays the one already shown.
      text = self._render(f"Error: {e}")
      return StepResult(text, 0.0, False, self._checks(mentioned, gone, valid=False), False,
                        {"error": str(e)})
    mentioned |= self._names()
    notes = self._tick()
    mentioned |= self._names()
    if w.status == "open" and self._goal_reached():
      w.status = "done"
    if w.status == "done":
      notes.append("The task is complete.")
    text = self._render(" ".join([message] + notes))
    checks = self._checks(mentioned, gone, valid=True,
                          revealed=self._revealed(possible, was_open))
    self._show_compound()
    done = w.status != "open"
    success = w.status == "done"
    info = {"success": success} if done else {}
    return StepResult(text, float(success), done, checks, True, info)

  def _apply(self, action: str) -> str:
    """Parses and performs one command; raises _Fail without touching the state."""
    text = re.sub(r"\s+", " ", action.strip().lower()).rstrip(".!")
    for pattern, handler in _COMMANDS:
      m = re.fullmatch(pattern, text)
      if m:
        return handler(self, *[_strip_article(g) for g in m.groups()])
    raise _Fail("unknown command.")

  # ------------------------------------------------------------ commands

  def _look(self) -> str:
    return f"You look around the {self._w.room}."

  def _inventory(self) -> str:
    held = self._held()
    return f"You are holding the {held}." if held else "You are holding nothing."

  def _examine(self, name: str) -> str:
    what, target = self._resolve(name)
    w = self._w
    if what == "place":
      if target == "stove":
        return "The stove is broken." if w.stove_broken else f"The stove is {_on(w.stove_on)}."
      if target == "oven":
        return f"The oven is {_on(w.oven_on)}."
      if target == "freezer":
        return f"The freezer keeps things at {FREEZER_TEMP}C."
      return "A plain table."
    if what == "substance":
      return f"The {self._name(target)} is {self._state(target)}."
    if target in w.containers:
      contents = self._contents_text(target)
      return f"The {target} is empty." if contents == "empty" else f"The {target} holds {contents}."
    if target == THERMOMETER:
      return "A thermometer; hold it to measure temperatures."
    return f"A {target}."

  def _pick_up(self, name: str) -> str:
    what, target = self._resolve(name)
    if what == "place":
      raise _Fail(f"the {target} cannot be picked up.")
    if what == "substance":
      raise _Fail(f"pick up the container of the {self._name(target)} instead.")
    held = self._held()
    if held == target:
      raise _Fail(f"you already hold the {target}.")
    if held:
      raise _Fail(f"your hands are full: put the {held} down first.")
    self._w.places[target] = HAND
    return f"You pick up the {target}."

  def _put(self, name: str, dest: str) -> str:
    what, target = self._resolve(name)
    if what != "item" or self._held() != target:
      raise _Fail("you must hold something to put it down.")
    kind, place = self._resolve(dest)
    if kind != "place":
      raise _Fail("things go on the stove, in the oven, in the freezer or on the table; "
                  "use pour for contents.")
    self._w.places[target] = place
    return f"You put the {target} {PREPOSITION[place]} the {place}."

  def _pour(self, src_name: str, dst_name: str) -> str:
    src, dst = self._container(src_name), self._container(dst_name)
    w = self._w
    if src == dst:
      raise _Fail("a container cannot be poured into itself.")
    if not w.contents[src]:
      raise _Fail(f"the {src} is empty.")
    for kind in w.contents[src]:
      state = self._state(kind)
      if state == "gas" or (state == "solid" and kind not in POWDERS):
        raise _Fail(f"the {self._name(kind)} is {state} and cannot be poured.")
    moved = w.contents[src]
    temp = w.temps.pop(src)
    if w.contents[dst]:
      temp = (temp + w.temps[dst]) // 2
    w.contents[dst] = w.contents[dst] + moved
    w.contents[src] = []
    w.temps[dst] = temp
    return f"You pour the {src} into the {dst}."

  def _activate(self, name: str) -> str:
    device = self._device(name)
    w = self._w
    if device == "stove" and w.stove_broken:
      return "You turn the knob of the stove, but nothing happens."
    if getattr(w, f"{device}_on"):
      raise _Fail(f"the {device} is already on.")
    setattr(w, f"{device}_on", True)
    return f"You turn on the {device}."

  def _deactivate(self, name: str) -> str:
    device = self._device(name)
    w = self._w
    if not getattr(w, f"{device}_on"):
      raise _Fail(f"the {device} is already off.")
    setattr(w, f"{device}_on", False)
    return f"You turn off the {device}."

  def _wait(self) -> str:
    return "You wait."

  def _wait_arg(self, _arg: str) -> str:
    raise _Fail("wait takes no argument; each wait is one step.")

  def _measure(self, name: str) -> str:
    what, target = self._resolve(name)
    w = self._w
    if what == "substance":
      container = self._container_of(target)
    elif what == "item" and target in w.containers:
      container = target
    else:
      raise _Fail("only substances and containers can be measured.")
    if self._held() != THERMOMETER:
      raise _Fail("you must hold the thermometer to measure.")
    if not w.contents[container]:
      raise _Fail(f"the {container} is empty.")
    w.reading = w.temps[container] + w.offset
    task = w.task
    if (task.kind == "measure" and task.target in w.contents[container]
        and self._answer_evident()):
      w.measured = True
    return f"The thermometer reads {w.reading}C."

  def _mix(self, a_name: str, b_name: str) -> str:
    a, b = self._substance(a_name), self._substance(b_name)
    if a == b:
      raise _Fail("mix two different substances.")
    if self._container_of(a) != self._container_of(b):
      raise _Fail(f"the {self._name(a)} and the {self._name(b)} must be in one container.")
    product, liquid = _recipe(a, b)
    if product is None:
      raise _Fail(f"the {self._name(a)} and the {self._name(b)} do not combine.")
    for kind in liquid:
      if self._state(kind) != "liquid":
        raise _Fail(f"the {self._name(kind)} must be liquid to mix.")
    w = self._w
    message = f"You mix the {self._name(a)} and the {self._name(b)} into {product}."
    container = self._container_of(a)
    old = w.contents[container]
    first = min(old.index(a), old.index(b))
    new = [k for k in old if k not in (a, b)]
    new.insert(first, product)
    w.contents[container] = new
    w.consumed += [a, b]
    return message

  def _focus(self, name: str) -> str:
    what, target = self._resolve(name)
    w = self._w
    label = self._name(target) if what == "substance" else target
    if w.task.kind == "measure" and target in w.task.boxes:
      w.status = "done" if target == self._answer_box() else "failed"
      self._show_answer()
      verdict = "correct" if w.status == "done" else "wrong; the task has failed"
      return f"You focus on the {target}: that answer is {verdict}."
    return f"You focus on the {label}."

  # ------------------------------------------------------------ physics

  def _tick(self) -> list[str]:
    """Advances time by one step; returns notes about changes of state."""
    w = self._w
    w.time += 1
    notes = []
    for c in w.containers:
      if not w.contents[c]:
        continue
      before = [(k, self._name(k), self._state(k)) for k in w.contents[c]]
      w.temps[c] = self._next_temp(c)
      for kind, old_name, old_state in before:
        new_state = self._state(kind)
        if new_state != old_state:
          notes.append(f"The {old_name} in the {c} {_change_verb(old_state, new_state)}.")
    return notes

  def _next_temp(self, container: str) -> int:
    w = self._w
    t = w.temps[container]
    place = w.places[container]
    if place == "stove" and w.stove_on:
      return t + w.stove_rate
    if place == "oven" and w.oven_on:
      return t + OVEN_RATE
    if place == "freezer":
      return _toward(t, FREEZER_TEMP, FREEZER_RATE)
    return _toward(t, w.ambient, DRIFT)

  def _goal_reached(self) -> bool:
    w = self._w
    task = w.task
    if task.kind == "mix":
      return any(task.target in w.contents[c] for c in w.containers)
    if task.kind == "measure" or task.target in w.consumed:
      return False
    state = self._state(task.target)
    temp = w.temps[self._container_of(task.target)]
    return {"melt": state != "solid", "boil": state == "gas", "freeze": state == "solid",
            "heat": temp > task.threshold, "cool": temp < task.threshold}[task.kind]

  def _answer_box(self) -> str:
    task = self._w.task
    return task.boxes[0] if self._melt(task.target) > task.threshold else task.boxes[1]

  def _answer_evident(self) -> bool:
    """The target melted, or stays solid above the threshold: its box is then known."""
    task = self._w.task
    c = self._container_of(task.target)
    return self._state(task.target) != "solid" or self._w.temps[c] > task.threshold

  # ------------------------------------------------------------ queries

  def _held(self) -> str | None:
    for item in self._w.items:
      if self._w.places[item] == HAND:
        return item
    return None

  def _present(self) -> list[str]:
    w = self._w
    return [k for c in w.containers for k in w.contents[c]]

  def _container_of(self, kind: str) -> str | None:
    for c in self._w.containers:
      if kind in self._w.contents[c]:
        return c
    return None

  def _state(self, kind: str) -> str:
    melt = self._melt(kind)
    boil = melt + COMPOUND_BOIL_GAP if kind == COMPOUND else SUBSTANCES[kind].boil
    return _phase(melt, boil, self._w.temps[self._container_of(kind)])

  # ------------------------------------------------------------ hidden facts

  def _melt(self, kind: str) -> int:
    if kind != COMPOUND:
      return SUBSTANCES[kind].melt
    w = self._w
    low, high = w.compound_melt
    # Keyed by the range: the same value until a shown state narrows it, and a
    # fresh one in another hidden stream (the twin world).
    rng = random.Random(f"{self.name}/{self._seed}/{self._stream}/compound-melt/{low}-{high}")
    return rng.choice(_melt_candidates(w.compound_melt, w.task.threshold))

  def _possible_melts(self) -> list[int]:
    """The compound's melting points consistent with all shown so far ([] without one)."""
    w = self._w
    if w.compound_melt is None:
      return []
    return _melt_candidates(w.compound_melt, w.task.threshold)

  def _show_compound(self) -> None:
    """Narrows the compound's range by the state the last observation showed."""
    w = self._w
    container = self._container_of(COMPOUND)
    if container is not None:
      w.compound_melt = _narrow(w.compound_melt, self._state(COMPOUND), w.temps[container])

  def _show_answer(self) -> None:
    """Narrows the compound's range by the box answer just given."""
    w = self._w
    if w.task.target != COMPOUND:
      return
    low, high = w.compound_melt
    if self._melt(COMPOUND) > w.task.threshold:
      w.compound_melt = (max(low, w.task.threshold + 1), high)
    else:
      w.compound_melt = (low, min(high, w.task.threshold))

  def _revealed(self, possible: list[int], was_open: bool) -> tuple[str, ...]:
    """Keys of the facts of this step's next state that the melting points
    `possible` before it left open."""
    w = self._w
    out = []
    container = self._container_of(COMPOUND)
    if container is not None:
      temp = w.temps[container]
      states = {_phase(m, m + COMPOUND_BOIL_GAP, temp) for m in possible}
      if len(states) > 1:
        out += [container] + sorted(states)
    answers = {m > w.task.threshold for m in possible}
    if was_open and w.status != "open" and w.task.kind == "measure" and len(answers) > 1:
      out.append("task")
    return tuple(out)

  def _name(self, kind: str) -> str:
    return WATER_NAMES[self._state(kind)] if kind == "water" else kind

  def _names(self) -> set[str]:
    return {self._name(k) for k in self._present()}

  def _resolve(self, name: str) -> tuple[str, str]:
    w = self._w
    if name in w.items:
      return "item", name
    if name in PLACES:
      return "place", name
    for kind in self._present():
      if name in (kind, self._name(kind)):
        return "substance", kind
    raise _Fail("you see no such thing here." if name else "say what to act on.")

  def _container(self, name: str) -> str:
    what, target = self._resolve(name)
    if what == "substance":
      return self._container_of(target)
    if what == "item" and target in self._w.containers:
      return target
    raise _Fail(f"the {target} is not a container.")

  def _substance(self, name: str) -> str:
    what, target = self._resolve(name)
    if what != "substance":
      raise _Fail(f"the {target} is not a substance.")
    return target

  def _device(self, name: str) -> str:
    what, target = self._resolve(name)
    if target not in ("stove", "oven"):
      raise _Fail(f"the {target} cannot be switched on or off.")
    return target

  # ---------------------------------------------------------- rendering

  def _contents_text(self, container: str) -> str:
    w = self._w
    if not w.contents[container]:
      return "empty"
    temp = w.temps[container]
    return " + ".join(f"{self._name(k)} ({self._state(k)}, {temp}C)"
                      for k in w.contents[container])

  def _facts(self) -> tuple[dict[str, str], dict[str, str]]:
    """(placement facts, status facts) from the hidden state, in rendering order."""
    w = self._w
    placement = {}
    for place in PLACES:
      here = [i for i in w.items if w.places[i] == place]
      placement[PLACE_KEYS[place]] = ", ".join(here) or "nothing"
    counts = {s: 0 for s in STATES}
    for kind in self._present():
      counts[self._state(kind)] += 1
    stove = "broken" if w.stove_broken else _on(w.stove_on)
    status = {"location": w.room, "holding": self._held() or "nothing", "stove": stove,
              "oven": _on(w.oven_on)}
    status.update({c: self._contents_text(c) for c in w.containers})
    status.update({s: str(counts[s]) for s in STATES})
    status.update({"reading": "none" if w.reading is None else f"{w.reading}C",
                   "task": w.status, "time": str(w.time)})
    return placement, status

  def _render(self, message: str) -> str:
    placement, status = self._facts()
    line = "; ".join(f"{k}: {v}" for k, v in placement.items())
    line = line[0].upper() + line[1:]
    anchor = " | ".join(f"{k}: {v}" for k, v in status.items())
    return f"{message}\n{line}\n[{anchor}]"

  def _checks(self, mentioned: set[str], gone: list[str], valid: bool,
              revealed: tuple[str, ...] = ()) -> Checks:
    """Checks from the hidden state.

    `mentioned`: the names water had during the step (its message may use any);
    `gone`: substances mixed away before the step, which no text may name;
    `revealed`: keys of the fields drawn from hidden state at this step.
    """
    w = self._w
    placement, status = self._facts()
    include = list(w.items) + sorted(self._names())
    exclude = []
    if "water" in self._present():
      exclude += [n for n in WATER_NAMES.values() if n not in mentioned]
    for kind in gone:
      exclude += list(WATER_NAMES.values()) if kind == "water" else [kind]
    (include if not valid else exclude).append("Error")
    return Checks(must_include=tuple(include), must_exclude=tuple(sorted(set(exclude))),
                  fields={**placement, **status}, revealed=revealed)

  # -------------------------------------------------------------- policies

  def expert_action(self) -> str:
    w = self._w
    task = w.task
    if w.status != "open":
      return "look"
    if task.kind == "mix":
      return self._expert_mix()
    if task.target in w.consumed:
      return "look"  # the target was mixed away: nothing left to do
    container = self._container_of(task.target)
    if task.kind == "measure":
      return self._expert_measure(container)
    cool = task.kind in ("freeze", "cool")
    return self._expert_temper(container, "cool" if cool else "heat")

  def _expert_temper(self, container: str, direction: str) -> str:
    """Moves `container` to a heater (switched on) or to the freezer, then waits."""
    w = self._w
    if direction == "cool":
      place = "freezer"
    else:
      place = "oven" if w.stove_broken else "stove"
    if w.places[container] != place:
      return self._expert_bring(container, place)
    if place != "freezer" and not getattr(w, f"{place}_on"):
      return f"activate {place}"
    return "wait"

  def _expert_bring(self, item: str, place: str) -> str:
    held = self._held()
    if held == item:
      return f"put {item} {PREPOSITION[place]} {place}"
    if held:
      return f"put {held} on table"
    return f"pick up {item}"

  def _expert_measure(self, container: str) -> str:
    w = self._w
    target = w.task.target
    if w.measured:
      return f"focus on {self._answer_box()}"
    if self._answer_evident():
      held = self._held()
      if held == THERMOMETER:
        return f"measure temperature of {self._name(target)}"
      return f"put {held} on table" if held else f"pick up {THERMOMETER}"
    action = self._expert_temper(container, "heat")
    if action == "wait" and self._held() is None:
      return f"pick up {THERMOMETER}"  # use the waiting time to fetch the thermometer
    return action

  def _expert_mix(self) -> str:
    w = self._w
    a, b, liquid = RECIPES[w.task.target]
    if a in w.consumed or b in w.consumed:
      return "look"
    ca, cb = self._container_of(a), self._container_of(b)
    if ca == cb:
      states = [self._state(k) for k in liquid]
      if all(s == "liquid" for s in states):
        return f"mix {self._name(a)} and {self._name(b)}"
      return self._expert_temper(ca, "cool" if "gas" in states else "heat")
    for src, dst in ((ca, cb), (cb, ca)):
      if self._pourable(src):
        return f"pour {src} into {dst}"
    for kind in liquid:
      state = self._state(kind)
      if state != "liquid":
        return self._expert_temper(self._container_of(kind), "cool" if state == "gas" else "heat")
    return self._expert_temper(ca, "heat")

  def _pourable(self, container: str) -> bool:
    return all(self._state(k) == "liquid" or (self._state(k) == "solid" and k in POWDERS)
               for k in self._w.contents[container])

  def random_action(self, rng: random.Random) -> str:
    w = self._w
    things = list(w.items) + sorted(self._names()) + list(PLACES)
    subs = sorted(self._names()) or ["water"]
    choice = rng.randrange(12)
    if choice == 0:
      return rng.choice(["look", "inventory"])
    if choice == 1:
      return f"examine {rng.choice(things)}"
    if choice == 2:
      return f"pick up {rng.choice(w.items)}"
    if choice == 3:
      place = rng.choice(PLACES)
      return f"put {rng.choice(w.items)} {PREPOSITION[place]} {place}"
    if choice == 4:
      return f"pour {rng.choice(w.containers)} into {rng.choice(w.containers)}"
    if choice == 5:
      return f"{rng.choice(['activate', 'deactivate'])} {rng.choice(['stove', 'oven'])}"
    if choice in (6, 7):
      return "wait"
    if choice == 8:
      return f"measure temperature of {rng.choice(subs + list(w.containers))}"
    if choice == 9:
      return f"mix {rng.choice(subs)} and {rng.choice(subs)}"
    if choice == 10:
      return f"focus on {rng.choice(things)}"
    return f"pick up {THERMOMETER}"

  def invalid_action(self, rng: random.Random) -> str:
    w = self._w
    c = rng.choice(w.containers)
    ghost = rng.choice(GHOSTS)
    return rng.choice([
        f"pick up {ghost}", f"examine {ghost}", f"pour {ghost} into {c}",
        f"pour {c} into {c}", f"pick up {rng.choice(PLACES)}", "activate freezer",
        f"deactivate {c}", f"mix {ghost} and water", "wait 3", "dance", f"eat the {c}",
        "pick up", "put", "focus on", "measure temperature of", f"put {c} in {ghost}",
    ])

  # ---------------------------------------------------------------- check

  @classmethod
  def check(cls, spec: Spec, step: Step, prediction: str) -> CheckResult:
    return _check(spec, step, prediction if isinstance(prediction, str) else "")


def _strip_article(text: str | None) -> str:
  return re.sub(r"^(the|a|an) ", "", (text or "").strip())


def _on(flag: bool) -> str:
  return "on" if flag else "off"


def _change_verb(old: str, new: str) -> str:
  if STATES.index(new) > STATES.index(old):
    return "boils" if new == "gas" else "melts"
  return "freezes" if new == "solid" else "condenses"


def _phase(melt: int, boil: int, temp: int) -> str:
  if temp <= melt:
    return "solid"
  return "gas" if temp >= boil else "liquid"


def _narrow(melt_range: tuple[int, int], state: str, temp: int) -> tuple[int, int]:
  """The compound's melting-point range once it was seen in `state` at `temp`."""
  low, high = melt_range
  if state == "solid":
    return max(low, temp), high
  if state == "gas":
    return low, min(high, temp - COMPOUND_BOIL_GAP)
  return max(low, temp - COMPOUND_BOIL_GAP + 1), min(high, temp - 1)


def _melt_candidates(melt_range: tuple[int, int], threshold: int | None) -> list[int]:
  """Melting points in `melt_range` the measuring task's `threshold` allows."""
  low, high = melt_range
  return [m for m in range(low, high + 1)
          if threshold is None or abs(m - threshold) >= ANSWER_GAP]


def _recipe(a: str, b: str) -> tuple[str | None, tuple[str, ...]]:
  for product, (x, y, liquid) in RECIPES.items():
    if {a, b} == {x, y}:
      return product, liquid
  return None, ()


_COMMANDS = (
    (r"look(?: around)?", LabEnv._look),
    (r"(?:inventory|i)", LabEnv._inventory),
    (r"(?:examine|look at|x) (.+)", LabEnv._examine),
    (r"(?:pick up|take|get)(?: (.*))?", LabEnv._pick_up),
    (r"(?:put|place|move) (.+?) (?:in|into|on|onto|to) (.+)", LabEnv._put),
    (r"pour (.+?) (?:into|in|onto) (.+)", LabEnv._pour),
    (r"(?:activate|turn on|switch on) (.+)", LabEnv._activate),
    (r"(?:deactivate|turn off|switch off) (.+)", LabEnv._deactivate),
    (r"wait", LabEnv._wait),
    (r"wait (.+)", LabEnv._wait_arg),
    (r"measure(?: the)?(?: temperature of)?(?: (.*))?", LabEnv._measure),
    (r"mix (.+?) (?:and|with) (.+)", LabEnv._mix),
    (r"focus(?: on)?(?: (.*))?", LabEnv._focus),
)


# ---------------------------------------------------------------- world building


def _build_world(rng: random.Random, steer: str) -> _World:
  """Draws the task first, then a lab whose substances and placements fit it."""
  task, required, frozen = _draw_task(rng)
  others = [k for k in STARTERS if k not in required]
  substances = list(required) + rng.sample(others, rng.randint(1, 2))
  n_containers = min(len(CONTAINERS), len(substances) + rng.randint(1, 2))
  containers = sorted(rng.sample(CONTAINERS, n_containers))
  order = list(containers)
  rng.shuffle(order)
  contents = {c: [] for c in containers}
  places = {}
  for kind, c in zip(substances, order):
    contents[c] = [kind]
    if kind in frozen:
      places[c] = "freezer"
    elif kind in required:
      places[c] = "table"
    else:
      places[c] = rng.choice(("table", "table", "freezer", "stove", "oven"))
  for c in order[len(substances):]:
    places[c] = rng.choice(("table", "table", "stove"))
  items = sorted(containers + [THERMOMETER] + list(task.boxes))
  for item in items:
    places.setdefault(item, "table")
  ambient = COLD_ROOM_TEMP if steer == STEER_COLD else ROOM_TEMP
  temps = {c: FREEZER_TEMP if places[c] == "freezer" else ambient
           for c in containers if contents[c]}
  return _World(
      room=rng.choice(ROOMS), ambient=ambient,
      stove_rate=rng.choice((20, 25, 30)) * (2 if steer == STEER_FAST else 1),
      offset=OFFSET if steer == STEER_OFFSET else 0, stove_broken=steer == STEER_BROKEN,
      items=tuple(items), containers=tuple(containers), places=places, contents=contents,
      temps=temps, task=task, compound_melt=COMPOUND_MELT if COMPOUND in substances else None)


def _draw_task(rng: random.Random) -> tuple[_Task, list[str], set[str]]:
  """(task, substances it needs, those that start in the freezer).

  Every task starts unsolved whatever the steer: starting states of matter do
  not depend on the room temperature (see SUBSTANCES)."""
  kind = rng.choice(("melt", "boil", "freeze", "heat", "cool", "measure", "mix", "mix"))
  if kind == "melt":
    if rng.random() < 0.3:
      target = rng.choice(FREEZABLE)
      return _Task("melt", target), [target], {target}
    target = rng.choice(MELTABLE)
    return _Task("melt", target), [target], set()
  if kind == "boil":
    target = rng.choice(BOILABLE)
    return _Task("boil", target), [target], {target} if rng.random() < 0.2 else set()
  if kind == "freeze":
    target = rng.choice(FREEZABLE)
    return _Task("freeze", target), [target], set()
  if kind == "heat":
    target = rng.choice(STARTERS)
    return _Task("heat", target, rng.randrange(40, 201, 10)), [target], set()
  if kind == "cool":
    target = rng.choice(STARTERS)
    return _Task("cool", target, rng.choice((-15, -10, -5))), [target], set()
  if kind == "measure":
    target = rng.choice(MELTABLE + (COMPOUND,) * 3)
    # The compound's melting point is drawn later, lazily, away from the threshold.
    threshold = rng.choice([t for t in range(30, 301, 10) if target == COMPOUND
                            or abs(t - SUBSTANCES[target].melt) >= ANSWER_GAP])
    boxes = tuple(f"{c} box" for c in rng.sample(COLORS, 2))
    return _Task("measure", target, threshold, boxes), [target], set()
  product = rng.choice(sorted(RECIPES))
  a, b, _ = RECIPES[product]
  frozen = {"water"} if "water" in (a, b) and rng.random() < 0.6 else set()
  return _Task("mix", product), [a, b], frozen


def _task_text(w: _World) -> str:
  t = w.task
  if t.kind == "melt":
    return f"Melt the {t.target}: change its state of matter to liquid."
  if t.kind == "boil":
    return f"Boil the {t.target}: change its state of matter to gas."
  if t.kind == "freeze":
    return f"Freeze the {t.target}: change its state of matter to solid."
  if t.kind == "heat":
    return f"Heat the {t.target} above {t.threshold}C."
  if t.kind == "cool":
    return f"Cool the {t.target} below {t.threshold}C."
  if t.kind == "measure":
    return (f"Use the thermometer to find out whether the melting point of the {t.target} is "
            f"above {t.threshold}C. If it is, focus on the {t.boxes[0]}; otherwise focus on the "
            f"{t.boxes[1]}.")
  a, b, liquid = RECIPES[t.target]
  need = " and ".join(liquid)
  return f"Make {t.target} by mixing {a} and {b} in one container ({need} must be liquid)."


def _rules(w: _World, steer: str) -> tuple[str, ...]:
  rules = [
      "Commands: look, inventory, examine X, pick up X, put X on/in Y (stove, oven, freezer, "
      "table), pour X into Y, activate X, deactivate X, wait, measure temperature of X, mix X "
      "and Y, focus on X.",
      "You hold at most one item; measuring needs the thermometer held and reads the "
      "temperature before the step.",
      f"Each successful action is one step: an active stove heats its contents by "
      f"{w.stove_rate}C and an active oven by {OVEN_RATE}C per step; the freezer cools by "
      f"{FREEZER_RATE}C per step down to {FREEZER_TEMP}C; anything else drifts {DRIFT}C per "
      f"step toward the room temperature of {w.ambient}C.",
      "A substance is solid at or below its melting point, gas at or above its boiling point "
      "and liquid in between; water is called ice when solid and steam when gas.",
      "Only liquids and powders (salt, sugar) can be poured; contents poured together take "
      "their average temperature, rounded down.",
      "Recipes, mixed in one container: salt + liquid water = brine, sugar + liquid water = "
      "syrup, liquid chocolate + liquid butter = fudge.",
  ]
  if steer:
    rules.append(_STEER_RULES[steer])
  return tuple(rules)


# ---------------------------------------------------------------- state check

_ITEM = re.compile(r"^([a-z][a-z ]*?) \((solid|liquid|gas), (-?\d+)C\)$")
_COMPOUND_TASK = re.compile(r"melting point of the compound is above (-?\d+)C")
_KIND_OF_NAME = {name: "water" for name in WATER_NAMES.values()}
CONSTRAINTS = ("known_kinds", "states_match_temperatures", "counts_match_listing",
               "containers_placed_once", "one_temperature_per_container", "substances_unique")


def _parse(text: str) -> tuple[dict[str, str], dict[str, str] | None]:
  """(placement facts, status facts) of a state, keys lower-case; the status is
  None when the trailing status line is missing or malformed."""
  status = parse_status_line(text)
  if status is None:
    return {}, None
  lines = text.strip().splitlines()
  placement = {}
  for part in lines[-2].split("; ") if len(lines) >= 2 else ():
    key, sep, value = part.partition(": ")
    key = key.strip().lower()
    if sep and key in PLACE_KEYS.values():
      placement[key] = value.strip()
  return placement, {k.lower(): v for k, v in status.items()}


def _well_formed(status: dict[str, str] | None) -> bool:
  return status is not None and all(k in status for k in STATUS_KEYS)


def _contents(value: str) -> list[tuple[str, str, int]] | None:
  """Parses `water (liquid, 45C) + salt (solid, 45C)`; None if malformed."""
  if value == "empty":
    return []
  out = []
  for part in value.split(" + "):
    m = _ITEM.match(part.strip())
    if not m:
      return None
    out.append((m.group(1), m.group(2), int(m.group(3))))
  return out


def _masked(value: str) -> list[tuple[str, str, int]] | None:
  """Contents with the compound's (drawn) state left out."""
  items = _contents(value)
  if items is None:
    return None
  return [(n, "?" if n == COMPOUND else s, t) for n, s, t in items]


def _kind(name: str) -> str:
  return _KIND_OF_NAME.get(name, name)


def _check(spec: Spec, step: Step, prediction: str) -> CheckResult:
  checks = step.checks
  placement, status = _parse(prediction)
  facts = {**placement, **(status or {})}
  determined = {FORMAT: _well_formed(status)}
  revealed = {}
  for key, value in checks.fields.items():
    mine = facts.get(key.lower(), "")
    ok = mine.lower() == str(value).lower()
    if not checks.is_revealed_field(key):
      determined[f"field:{key}"] = ok
      continue
    revealed[f"field:{key}"] = ok
    # The drawn part of a revealed field is the compound's state (or the box
    # answer): what a container holds, how hot, and that the task ended are not.
    if key == "task":
      determined["task_finished"] = mine in ("done", "failed")
    elif key not in STATUS_KEYS:
      masked = _masked(mine)
      determined[f"contents:{key}"] = masked is not None and masked == _masked(value)
  mentions = generic.fact_entries(checks, prediction)
  determined.update(mentions.determined)
  revealed.update(mentions.revealed)
  return CheckResult(determined, revealed, _constraints(spec, step.state, placement, status))


def _constraints(spec: Spec, state: str, placement: dict[str, str],
                 status: dict[str, str] | None) -> dict[str, bool]:
  """Rules every predicted state obeys, invented content included: the world's
  containers and substances, states of matter its physics allows at the listed
  temperatures (the compound's consistent with its range, the task's threshold
  and its state in s_t), counts that match the listing, each container in one
  place, one temperature per container, each substance once."""
  if not _well_formed(status):
    # Without a status line nothing is consistent (no vacuous passes on garbage).
    return dict.fromkeys(CONSTRAINTS, False)
  containers = {k: _contents(v) for k, v in status.items() if k not in STATUS_KEYS}
  parsed = bool(containers) and all(v is not None for v in containers.values())
  items = [item for v in containers.values() if v for item in v] if parsed else []
  world_containers, world_kinds = _world(spec)
  melt_range, threshold = _compound_knowledge(spec, state)
  listed = [i for v in placement.values() if v != "nothing" for i in v.split(", ")]
  if status["holding"] != "nothing":
    listed.append(status["holding"])
  kinds = [_kind(n) for n, _, _ in items]
  return {
      "known_kinds": parsed and set(containers) <= world_containers
                     and set(kinds) <= world_kinds,
      "states_match_temperatures": parsed and all(_plausible(n, s, t, melt_range, threshold)
                                                  for n, s, t in items),
      "counts_match_listing": parsed and all(
          status[s] == str(sum(1 for _, st, _ in items if st == s)) for s in STATES),
      "containers_placed_once": len(placement) == len(PLACE_KEYS) and bool(containers)
                                and all(listed.count(c) == 1 for c in containers),
      "one_temperature_per_container": parsed and all(len({t for _, _, t in v}) <= 1
                                                      for v in containers.values()),
      "substances_unique": parsed and len(kinds) == len(set(kinds)),
  }


def _world(spec: Spec) -> tuple[set[str], set[str]]:
  """(containers, substance kinds) of the world: those s0 lists, and the
  products its recipes can make."""
  _, status = _parse(spec.initial_state)
  containers = {k: _contents(v) for k, v in (status or {}).items() if k not in STATUS_KEYS}
  kinds = {_kind(n) for v in containers.values() if v for n, _, _ in v}
  return set(containers), kinds | set(RECIPES)


def _compound_knowledge(spec: Spec, state: str) -> tuple[tuple[int, int], int | None]:
  """(the compound's melting-point range given its state in s_t, the
  measuring task's threshold)."""
  m = _COMPOUND_TASK.search(spec.task)
  melt_range = COMPOUND_MELT
  _, status = _parse(state)
  for key, value in (status or {}).items():
    if key in STATUS_KEYS:
      continue
    for name, st, temp in _contents(value) or ():
      if name == COMPOUND:
        melt_range = _narrow(melt_range, st, temp)
  return melt_range, int(m.group(1)) if m else None


def _plausible(name: str, state: str, temp: int, melt_range: tuple[int, int],
               threshold: int | None) -> bool:
  """Whether the world's physics allows `name` in `state` at `temp`."""
  if name == COMPOUND:
    return bool(_melt_candidates(_narrow(melt_range, state, temp), threshold))
  kind = _kind(name)
  if kind not in SUBSTANCES:
    return True  # an unknown kind fails known_kinds
  sub = SUBSTANCES[kind]
  named = kind != "water" or WATER_NAMES[state] == name
  return named and _phase(sub.melt, sub.boil, temp) == state
