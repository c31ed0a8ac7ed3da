"""ALFWorld-style household games, synthesized offline: `alfworld/<task type>`.

What ships and what does not. ALFWorld's own games (`json_2.1.1/**/game.tw-pddl`,
each built from an ALFRED trajectory's `initial_state.pddl` and `traj_data.json`)
come from `alfworld-download`, which needs the network, and regenerating them
(`alfworld.gen`) needs the AI2-THOR simulator, a Unity build downloaded at run
time. Neither works offline. The `alfworld` package does ship the PDDL domain
(`alfworld/data/alfred.pddl`), the text grammar (`alfred.twl2`), the layouts of
the 120 AI2-THOR floor plans (`alfworld/gen/layouts`: the object types of each
scene, its receptacle instances with their interaction poses, its reachable
points), the ALFRED constants (which object types each receptacle type holds;
which are heatable, coolable, cleanable, toggleable; which rooms suit each task
type; ALFRED's train and test scenes) and the goal library (each task type's
PDDL goal and goal-text templates).

So each game is synthesized from those, deterministically from (task type,
seed): a floor plan valid for the task type, its receptacles at their layout
poses, target and distractor objects placed in receptacle types that ALFRED
allows to hold them, the task type's goal and a goal text from its templates.
It is written as a `game.tw-pddl` in ALFWorld's format and played as ALFWorld
plays its games: TextWorld's PDDL engine (`textworld.envs.PddlEnv`) with
ALFWorld's grammar and demangler (names like `cabinet 3`), its admissible
commands and its goal check. Ours rather than ALFRED's: where objects start
(ALFRED places them with THOR physics), one instance of each receptacle type a
layout lists without a pose (stove burner, coffee machine, toaster, garbage
can, ...) at a seeded reachable point, the agent's start pose, and desk lamps on
a desk, side table, dresser or shelf (look_at_obj_in_light uses desk lamps
only: floor lamps stand on the floor, where the domain cannot toggle them).

Tasks: the six ALFWorld task types. Seeds: 0..9999 per task type, split by
`seed_ranges`; train and valid games use ALFRED's train floor plans (like
ALFWorld's valid_seen), test games its test floor plans (like valid_unseen).
Games are cached under `$MDLM_WM_ALFWORLD_CACHE` (default
`~/.cache/mdlm_wm/alfworld`), written to a temporary file and renamed.

Policies. The expert is the PDDL planner (Fast Downward, ALFWorld's "planner"
expert type): it plans when first asked and replans, when next asked, after
any valid action that was not its next step, so the noisy policy's detours
still end in success.
The random policy draws from the engine's admissible commands; invalid
actions are commands built from the game's names that are not admissible.

Reward and success: the engine scores 1 when the goal holds (and the episode
ends), 0 before; the per-step reward is that score's delta.

Next states are the engine's feedback, then the status line from the engine's
facts, the same facts in `checks.fields`:
  [location: countertop 2 | holding: apple 3 | open: fridge 1 | hot: apple 3 | placed: 0/1]
`location` lists the receptacles at the agent's location ("middle of the room"
at the start), `open` the opened receptacles; heat / cool / clean tasks add
`hot` / `cool` / `clean` (target-type objects in that state), look tasks
`lamp` (on / off); all but look add `placed` (target-type objects, in the
needed state, inside a receptacle of the target type, out of the number
needed). A command the engine does not admit gets its "Nothing happens.",
`valid=False`, and that message in `checks.must_include`.

Revealed facts (adapters.base): the object ids an observation shows for the
first time (what a receptacle holds, seen on arrival or on opening it), and
a location the agent has not been at whose receptacles are more than the one
`go to` names (which others stand there is hidden). A newly seen location
lists the receptacle gone to and only receptacles of the room (all named in
the first state); listed objects are `a <kind> <n>` with ALFRED's object
kinds, distinct, and not the object held.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import random
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import textworld
import textworld.logic
from alfworld.agents.environment.alfred_tw_env import AlfredDemangler
from alfworld.gen import constants as C
from alfworld.gen import goal_library
from alfworld.info import ALFRED_PDDL_PATH, ALFRED_TWL2_PATH
from textworld.envs import PddlEnv

from mdlm_wm.checks.result import parse_status_line
from mdlm_wm.data.schema import Spec, Step
from mdlm_wm.envs.adapters.base import (RealEnv, check_split, list_items, mentions, render_state,
                                        same_value, seed_ranges)
from mdlm_wm.envs.base import StepResult

TASK_TYPES = ("look_at_obj_in_light", "pick_and_place_simple", "pick_clean_then_place_in_recep",
              "pick_cool_then_place_in_recep", "pick_heat_then_place_in_recep",
              "pick_two_obj_and_place")
N_GAMES = 10_000
CACHE_ENV = "MDLM_WM_ALFWORLD_CACHE"
# Bumped whenever generation changes, so a cache never serves games of an older generator.
GENERATOR_VERSION = 1
NOTHING = "Nothing happens."

_LAYOUTS = Path(C.__file__).parent / "layouts"
_SPLIT_SCENES = {"train": C.TRAIN_SCENE_NUMBERS, "valid": C.TRAIN_SCENE_NUMBERS,
                 "test": C.TEST_SCENE_NUMBERS}
# Receptacle types the PDDL domain knows (basins, not the sinks and tubs around them).
_RTYPES = tuple(sorted(set(C.STATIC_RECEPTACLES) - {"Sink", "Bathtub"}))
_PLACEABLE = frozenset(t for objs in C.VAL_RECEPTACLE_OBJECTS.values() for t in objs
                       if not t.endswith("Sliced"))
# The device each state-change task needs, the state it gives, and the constants'
# class of objects it accepts.
_DEVICE = {"pick_heat_then_place_in_recep": ("Microwave", "hot", "Heatable"),
           "pick_cool_then_place_in_recep": ("Fridge", "cool", "Coolable"),
           "pick_clean_then_place_in_recep": ("SinkBasin", "clean", "Cleanable")}
_STATE_PREDICATE = {"hot": "ishot", "cool": "iscool", "clean": "isclean"}
_LAMP = "DeskLamp"
_LAMP_HOLDERS = ("Desk", "SideTable", "Dresser", "Shelf")
# PDDL-safe ids, as ALFRED writes them (`Cabinet|+00.68|...` -> `Cabinet_bar__plus_00_dot_68...`).
_ID_CHARS = {"-": "_minus_", "#": "-", "|": "_bar_", "+": "_plus_", ".": "_dot_", ",": "_comma_"}
_ID_RE = re.compile("|".join(re.escape(k) for k in _ID_CHARS))
_RULES = (
    "Commands: look, inventory, go to (receptacle), open (receptacle), close (receptacle), "
    "take (object) from (receptacle), move (object) to (receptacle), examine (something), "
    "use (object), heat (object) with (receptacle), clean (object) with (receptacle), "
    "cool (object) with (receptacle), slice (object) with (object).",
    "A closed receptacle hides its contents; the agent holds at most one object.",
    "Heat with a microwave, cool with a fridge, clean with a sink basin; a lamp is used "
    "where it stands.",
    "Each next state ends with [location | holding | open | ...]: the receptacles where the "
    "agent is, what it holds, the open receptacles, and the task's object states and progress.",
)
_BOGUS = ("unicorn 1", "garage 1", "spaceship 1")
# ALFRED's kinds as ALFWorld's demangler names them (`ButterKnife` -> `butterknife 1`).
_KINDS = frozenset(t.lower() for t in C.OBJECTS)
_LISTED = re.compile(r"you see (.+?)\.(?:\s|$)")
_ITEM = re.compile(r"(?:a|an) ([a-z]+) (\d+)")


def _pddl_id(text: str) -> str:
  return _ID_RE.sub(lambda m: _ID_CHARS[m.group(0)], text)


def cache_dir() -> Path:
  default = Path.home() / ".cache" / "mdlm_wm" / "alfworld"
  return Path(os.environ.get(CACHE_ENV) or default) / f"v{GENERATOR_VERSION}"


# --------------------------------------------------------------------------
# Scenes and game synthesis.


@functools.cache
def _scene(number: int) -> tuple[tuple, tuple[str, ...], tuple]:
  """(receptacles as (id, type, location), object types, reachable grid points)."""
  stem = _LAYOUTS / f"FloorPlan{number}"
  posed = json.loads(Path(f"{stem}-openable.json").read_text())
  types = json.loads(Path(f"{stem}-objects.json").read_text())
  points = np.load(f"{stem}-layout.npy").tolist()
  receps = []
  for rid, (x, z, rot, horizon) in sorted(posed.items()):
    parts = rid.split("|")
    # Basins are the fifth part of their sink's id: `Sink|x|y|z|SinkBasin`.
    rtype = parts[4] if len(parts) > 4 else parts[0]
    receps.append((rid, rtype, _location(x, z, rot, horizon)))
  grid = tuple(sorted({(round(x / C.AGENT_STEP_SIZE), round(z / C.AGENT_STEP_SIZE))
                       for x, z in points}))
  return tuple(receps), tuple(sorted(types)), grid


def _location(x: float, z: float, rot: float, horizon: float) -> tuple[int, int, int, int]:
  """ALFRED's discrete pose: grid x, grid z, quarter turns, camera horizon."""
  return (round(x / C.AGENT_STEP_SIZE), round(z / C.AGENT_STEP_SIZE), int(rot) // 90,
          int(horizon))


def _room(number: int) -> str:
  return next(room for room, numbers in C.SCENE_TYPE.items() if number in numbers)


def _holds(rtype: str, otype: str) -> bool:
  return otype in C.VAL_RECEPTACLE_OBJECTS.get(rtype, ())


def _all_receptacles(number: int, rng: random.Random) -> list[tuple]:
  """The layout's posed receptacles plus one seeded instance per type it lists unposed."""
  posed, types, grid = _scene(number)
  receps = list(posed)
  have = {r[1] for r in receps}
  for rtype in types:
    if rtype in _RTYPES and rtype not in have:
      x, z = rng.choice(grid)
      coords = f"{x * C.AGENT_STEP_SIZE:+06.2f}|+00.00|{z * C.AGENT_STEP_SIZE:+06.2f}"
      # Basins get their sink's id form, so ALFWorld's demangler names them `sinkbasin 1`.
      rid = (f"{rtype[:-len('Basin')]}|{coords}|{rtype}" if rtype.endswith("Basin")
             else f"{rtype}|{coords}")
      receps.append((rid, rtype, (x, z, rng.randrange(4), 30)))
  return receps


def _scene_ok(task: str, number: int) -> bool:
  if _room(number) not in C.GOALS_VALID[task]:
    return False
  posed, types, _ = _scene(number)
  rtypes = {r[1] for r in posed} | (set(types) & set(_RTYPES))
  if task in _DEVICE and _DEVICE[task][0] not in rtypes:
    return False
  if task == "look_at_obj_in_light":
    return _LAMP in types and any(h in rtypes for h in _LAMP_HOLDERS)
  return True


@functools.cache
def _scenes(task: str, split: str) -> tuple[int, ...]:
  return tuple(n for n in sorted(_SPLIT_SCENES[split]) if _scene_ok(task, n))


def _split_of(seed: int) -> str:
  return next(s for s, r in seed_ranges(N_GAMES).items() if seed in r)


def synthesize(task: str, seed: int) -> dict:
  """A `game.tw-pddl` dict (ALFWorld's format plus our `mdlm_wm` metadata)."""
  rng = random.Random(f"alfworld/{task}/{seed}")
  number = rng.choice(_scenes(task, _split_of(seed)))
  receps = _all_receptacles(number, rng)
  types = _scene(number)[1]
  rtypes = sorted({r[1] for r in receps})
  device = _DEVICE.get(task, ("", "", ""))[0]
  placeable = [t for t in types if t in _PLACEABLE and any(_holds(r, t) for r in rtypes)]

  def holders(otype: str, banned: Sequence[str] = ()) -> list[tuple]:
    return [r for r in receps if _holds(r[1], otype) and r[1] not in banned]

  def parents(otype: str) -> list[str]:
    return [r for r in rtypes if _holds(r, otype) and r != device]

  if task == "look_at_obj_in_light":
    targets = [t for t in placeable if holders(t)]
  else:
    needed = _DEVICE[task][2] if task in _DEVICE else ""
    targets = [t for t in placeable
               if (not needed or t in C.VAL_ACTION_OBJECTS[needed])
               and any(holders(t, (p, device)) for p in parents(t))]
  otype = rng.choice(targets)
  parent = "" if task == "look_at_obj_in_light" else rng.choice(
      [p for p in parents(otype) if holders(otype, (p, device))])

  objects = []  # (id, type, receptacle)
  count = rng.randint(2, 3) if task == "pick_two_obj_and_place" else rng.randint(1, 3)
  for _ in range(count):
    objects.append((otype, rng.choice(holders(otype, (parent, device)))))
  others = [t for t in placeable if t != otype]
  for t in rng.sample(others, min(len(others), rng.randint(8, 14))):
    for _ in range(rng.randint(1, 2)):
      objects.append((t, rng.choice(holders(t))))
  toggle = ""
  if task == "look_at_obj_in_light":
    toggle = _LAMP
    objects.append((_LAMP, rng.choice([r for r in receps if r[1] in _LAMP_HOLDERS])))
  objects = [(f"{t}|{i:02d}", t, r) for i, (t, r) in enumerate(objects, start=1)]

  # The agent starts on a reachable point no receptacle is reached from: mid-room.
  taken = {r[2][:2] for r in receps}
  agent = (*rng.choice([p for p in _scene(number)[2] if p not in taken]), rng.randrange(4), 30)
  problem = _problem(task, receps, objects, agent, otype, parent, toggle)
  template = rng.choice(goal_library.gdict[task]["templates"])
  goal_text = template.format(obj=otype.lower(), recep=parent.lower(), toggle=toggle.lower(),
                              mrecep="")
  grammar = Path(ALFRED_TWL2_PATH).read_text().replace("UNKNOWN GOAL", goal_text)
  return {
      "pddl_domain": Path(ALFRED_PDDL_PATH).read_text(), "grammar": grammar,
      "pddl_problem": problem,
      "mdlm_wm": {"generator_version": GENERATOR_VERSION, "task_type": task, "seed": seed,
                  "scene": f"FloorPlan{number}", "object_target": otype,
                  "parent_target": parent, "toggle_target": toggle, "goal": goal_text},
  }


def _problem(task: str, receps: list[tuple], objects: list[tuple], agent: tuple, otype: str,
             parent: str, toggle: str) -> str:
  """The PDDL problem in ALFRED's `initial_state.pddl` form."""
  loc = "loc|{}|{}|{}|{}".format
  locs = sorted({r[2] for r in receps} | {agent})
  otypes = sorted(set(C.OBJECTS) - set(_RTYPES))
  decls = (["agent1 # agent"] + [f"{t}Type # otype" for t in otypes]
           + [f"{t}Type # rtype" for t in _RTYPES] + [f"{o[0]} # object" for o in objects]
           + [f"{r[0]} # receptacle" for r in receps] + [f"{loc(*p)} # location" for p in locs])
  used = sorted({o[1] for o in objects})
  init = [f"(receptacleType {r[0]} {r[1]}Type)" for r in receps]
  init += [f"(objectType {o[0]} {o[1]}Type)" for o in objects]
  init += [f"(canContain {rt}Type {t}Type)" for rt in sorted({r[1] for r in receps})
           for t in used if _holds(rt, t)]
  init += [f"(pickupable {o[0]})" for o in objects if o[1] != _LAMP]
  init += [f"(toggleable {o[0]})" for o in objects if o[1] == _LAMP]
  init += [f"(openable {r[0]})" for r in receps if r[1] in C.OPENABLE_CLASS_SET]
  init += [f"(atLocation agent1 {loc(*agent)})"]
  for predicate, cls in (("cleanable", "Cleanable"), ("heatable", "Heatable"),
                         ("coolable", "Coolable"), ("sliceable", "Sliceable")):
    init += [f"({predicate} {o[0]})" for o in objects if o[1] in C.VAL_ACTION_OBJECTS[cls]]
  # As in ALFRED, what starts in a fridge is cold.
  init += [f"(isCool {o[0]})" for o in objects
           if o[2][1] == "Fridge" and o[1] in C.VAL_ACTION_OBJECTS["Coolable"]]
  init += [f"(inReceptacle {o[0]} {o[2][0]})" for o in objects]
  init += [f"(objectAtLocation {o[0]} {loc(*o[2][2])})" for o in objects]
  init += [f"(receptacleAtLocation {r[0]} {loc(*r[2])})" for r in receps]
  goal = goal_library.gdict[task]["pddl"].format(obj=otype, recep=parent, toggle=toggle,
                                                 mrecep="")
  text = ("(define (problem mdlm_wm)\n(:domain alfred)\n(:objects\n  " + "\n  ".join(decls)
          + "\n)\n(:init\n  " + "\n  ".join(init) + "\n)\n" + goal)
  return _pddl_id(text)


def game_file(task: str, seed: int) -> Path:
  """The cached game of (task, seed), synthesized on first use."""
  path = cache_dir() / task / f"{seed}.tw-pddl"
  if not path.exists():
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(synthesize(task, seed)))
    os.replace(tmp, path)
  return path


# --------------------------------------------------------------------------
# The engine.


@functools.cache
def _memoize_grammar_parsing() -> None:
  """Makes TextWorld's PDDL text generator parse each grammar string once.

  PddlEnv derives the text of every admissible command from the grammar on
  every step, and each derivation re-parses the same few strings with TatSu:
  most of a step's time. Parsing is a pure function of the string, so the
  parse trees are cached; every call still converts the tree into fresh
  symbols, because a derivation mutates them. Only the PDDL text generator's
  module is touched, so other TextWorld engines are unaffected.
  """
  from textworld.envs.pddl import textgen

  parse = functools.lru_cache(maxsize=None)(
      lambda text, rule_name: textgen._PARSER.parse(text, rule_name=rule_name))

  def parse_and_convert(text, rule_name, **_):
    return textgen._Converter().walk(parse(text, rule_name))

  class Rule(textworld.logic.Rule):
    parse_conjunctive_query = classmethod(functools.lru_cache(maxsize=None)(
        lambda cls, expr: textworld.logic.Rule.parse_conjunctive_query(expr)))

  textgen._parse_and_convert = parse_and_convert
  textgen.Rule = Rule


@contextlib.contextmanager
def _argv_kept() -> Iterator[None]:
  """Restores sys.argv, which Fast Downward's PDDL translator overwrites on every
  load and reset (`fast_downward.pddl2sas` sets it for its option parser)."""
  argv = list(sys.argv)
  try:
    yield
  finally:
    sys.argv[:] = argv


def _names(facts, predicate: str, position: int = 0) -> list[str]:
  return sorted({_name(f, position) for f in facts if f.name == predicate})


def _name(fact, position: int) -> str:
  # ALFWorld's demangler leaves a trailing space on unnumbered names (`fridgetype `).
  return fact.names[position].strip()


class AlfworldEnv(RealEnv):
  """One ALFWorld task type; seed -> a synthesized game (see the module docstring)."""

  family = "alfworld"
  requires = "alfworld"
  max_steps = 50

  def __init__(self, task: str):
    super().__init__(task)
    _memoize_grammar_parsing()
    infos = textworld.EnvInfos(admissible_commands=True, facts=True, won=True)
    self._engine = AlfredDemangler(PddlEnv(infos), shuffle=False)
    self._state = None
    # The planner's plan from the current state; None once a detour made it stale.
    self._plan: list[str] | None = None
    self._params: dict = {}

  @classmethod
  def tasks(cls) -> list[str]:
    return list(TASK_TYPES)

  def split_seeds(self, split: str) -> list[int]:
    check_split(split)
    return list(seed_ranges(N_GAMES)[split])

  def close(self) -> None:
    self._engine.close()

  # ---- episode

  def reset(self, seed: int, steer: str | None = None) -> tuple[Spec, str]:
    steer = self.resolve_steer(seed, steer)
    if not 0 <= seed < N_GAMES:
      raise ValueError(f"{self.name} has seeds 0..{N_GAMES - 1}; got {seed}")
    data = json.loads(game_file(self.task, seed).read_text())
    self._params = data["mdlm_wm"]
    with _argv_kept():
      self._engine.load(data)
      self._state = self._engine.reset()
    self._plan = None
    first = render_state(self._state["feedback"], self._facts())
    self.start_record(first)
    spec = Spec(initial_state=first, task=self._params["goal"], tools=(), rules=_RULES,
                steer=steer)
    return spec, first

  def step(self, action: str) -> StepResult:
    command = action.strip()
    valid = command in self._state["admissible_commands"]
    self._state, score, done = self._engine.step(command)
    if self._plan and command == self._plan[0]:
      self._plan.pop(0)
    elif valid:
      # A valid detour changed the world: the expert replans when next asked.
      self._plan = None
    facts = self._facts()
    checks = self.step_checks(command, self._state["feedback"], facts, () if valid else (NOTHING,))
    won = bool(self._state["won"])
    return StepResult(render_state(self._state["feedback"], facts), float(score), bool(done),
                      checks, valid, {"success": won})

  def _facts(self) -> dict[str, str]:
    facts = self._state["facts"]
    here = set(_names(facts, "atlocation", 1))
    located = sorted(_name(f, 0) for f in facts
                     if f.name == "receptacleatlocation" and _name(f, 1) in here)
    p = self._params
    out = {"location": ", ".join(located) or "middle of the room",
           "holding": ", ".join(_names(facts, "holds", 1)) or "nothing",
           "open": ", ".join(_names(facts, "opened")) or "none"}
    if p["toggle_target"]:
      lamps = set(self._of_type(p["toggle_target"]))
      out["lamp"] = "on" if lamps & set(_names(facts, "istoggled")) else "off"
      return out
    # Target-type objects in the state the task needs (any state when it needs none).
    ok = set(self._of_type(p["object_target"]))
    if self.task in _DEVICE:
      state = _DEVICE[self.task][1]
      ok &= set(_names(facts, _STATE_PREDICATE[state]))
      out[state] = ", ".join(sorted(ok)) or "none"
    parents = set(self._of_type(p["parent_target"], "receptacletype"))
    placed = {_name(f, 0) for f in facts
              if f.name == "inreceptacle" and _name(f, 0) in ok and _name(f, 1) in parents}
    need = 2 if self.task == "pick_two_obj_and_place" else 1
    out["placed"] = f"{min(len(placed), need)}/{need}"
    return out

  def names(self) -> list[str]:
    facts = self._state["facts"]
    return _names(facts, "objecttype") + _names(facts, "receptacletype")

  @classmethod
  def location_constraints(cls, spec: Spec, step: Step, body: str,
                           location: str) -> dict[str, bool]:
    """A location first arrived at: not s_t's, it lists the receptacle `go to`
    names, and every receptacle it lists is one the first state named."""
    here = (parse_status_line(step.state) or {}).get("location")
    listed = [r.strip() for r in location.split(",") if r.strip()]
    target = step.action.strip().removeprefix("go to ")
    return {"location:new": bool(listed) and not same_value(here, location),
            "location:target": target in listed,
            "location:receptacles": bool(listed) and all(mentions(spec.initial_state, r)
                                                         for r in listed)}

  @classmethod
  def listing_constraints(cls, spec: Spec, step: Step, body: str,
                          status: Mapping[str, str]) -> dict[str, bool]:
    """Listed objects are `a <kind> <n>` of ALFRED's kinds, listed once, and
    not the object the prediction says is held."""
    items = [item for m in _LISTED.finditer(body) if m.group(1) != "nothing"
             for item in list_items(m.group(1))]
    ids = [m.group(1) + " " + m.group(2) if (m := _ITEM.fullmatch(item)) and m.group(1) in _KINDS
           else None for item in items]
    held = {h.strip() for h in status.get("holding", "").split(",")}
    return {"objects:known": None not in ids, "objects:distinct": len(set(ids)) == len(ids),
            "objects:not_held": not held & set(ids)}

  def _of_type(self, type_name: str, predicate: str = "objecttype") -> list[str]:
    """Names of the entities of an ALFRED type (`Apple` -> `apple 1`, `apple 2`)."""
    wanted = f"{type_name}Type".lower()
    return [_name(f, 0) for f in self._state["facts"]
            if f.name == predicate and _name(f, 1).lower() == wanted]

  # ---- policies

  def expert_action(self) -> str:
    if self._plan is None:
      self._plan = self._replan()
    return self._plan[0] if self._plan else "look"

  def _replan(self) -> list[str]:
    """Fast Downward's plan from the current state, as PddlEnv computes `policy_commands`.

    Called directly (PddlEnv keeps the planner state private) because asking for
    `policy_commands` makes the engine replan on every step, and a replan takes
    from ~0.1 s to ~15 s: only the expert, after a detour, needs one.
    """
    return list(self._engine._pddl_state.replan(self._engine._entity_infos))

  def random_action(self, rng: random.Random) -> str:
    return rng.choice(self._state["admissible_commands"])

  def invalid_action(self, rng: random.Random) -> str:
    """A command built from this game's names that the engine does not admit now."""
    facts = self._state["facts"]
    obj = rng.choice(_names(facts, "objecttype"))
    rec = rng.choice(_names(facts, "receptacletype"))
    options = [f"take {obj} from {rec}", f"move {obj} to {rec}", f"open {obj}",
               f"heat {rec} with {obj}", f"go to {rng.choice(_BOGUS)}", f"use {rec}",
               f"take {rng.choice(_BOGUS)} from {rec}"]
    admissible = set(self._state["admissible_commands"])
    bad = [o for o in options if o not in admissible]
    return rng.choice(bad)

  def admissible_actions(self) -> list[str] | None:
    return list(self._state["admissible_commands"])
