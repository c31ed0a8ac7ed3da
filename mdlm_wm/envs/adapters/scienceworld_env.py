"""ScienceWorld (Wang et al., 2022) behind the adapter protocol: `scienceworld/<task>`.

Tasks are the engine's 30 task names (`boil`, `find-animal`, `test-conductivity`, ...),
read from the package's `tasks.json`, so listing them starts no JVM; the names are
already file- and CLI-safe. A seed is a ScienceWorld *variation* index of the task;
`split_seeds` returns the engine's own train / dev / test variations (valid = dev).

Engine and determinism. `scienceworld.ScienceWorldEnv` is a JVM behind py4j
(~2-6 s to start, and the first load in it is slow too). Its Scala engine
carries state from one load to the next: a global random generator (which the
gold-path generator and some worlds draw from, e.g. the object a gold path
picks in find-non-living-thing) and the iteration order of hash sets keyed by
identity hashes (the order of objects in a room's description). So in a
reused JVM an episode depends on every episode played before it. By default
each reset therefore starts a fresh JVM and seeds its generator from (task,
variation): the same seed gives the same episode in any process. `reuse_jvm=True` keeps one JVM per
adapter instance across resets (faster, with the generator still seeded per
reset): episodes are then reproducible only as the same sequence of resets in
a fresh adapter. Either way a reset is `load(task, variation, "easy",
generateGoldPath=True)` and the engine's first move, "look around"; `close()`
shuts the JVM down. The engine's own step limit is disabled: episodes end at
`max_steps` (gold paths run up to ~180 steps, so it is 200) or when the engine
says done.

Simplifications: "easy", the preset of the ScienceWorld README's examples:
teleport action, doors and containers open, self-watering flower pots, and no
electrical actions except on the electrical tasks. It keeps gold paths short.

Policies. The expert replays the engine's gold action sequence open loop: it
advances when the action taken is its next gold action, so after a detour it
resumes where it was (the noisy policy may therefore fail; the gold path is
not a replanner) and says "look around" once the path is spent. The random
policy draws from the engine's valid action/object combinations in the
current state (sorted), less "reset task", a meta command rather than world
dynamics; the engine lists some its own parser then rejects (e.g. "dunk X
into Y"), so random actions can fail. `invalid_action` sends a command that no parser rule matches.

Score and reward. ScienceWorld reports a cumulative score in 0..100, often
above 0 before the first action (sub-goals that already hold); it signals
failure by setting it to -100 and ending the episode (e.g. after focusing on
the wrong object). The per-step reward is the score delta / 100, so the first
state's score (in its status line) plus 100 x the episode's rewards is the
final score. Success: the engine says done with score 100.

Next states end with the status line, from the engine's state (its free look
and inventory actions), the same facts in `checks.fields`:
  [location: kitchen | score: 35 | inventory: metal pot, thermometer]
Inventory items are the article-less names without their details, sorted.
Input the engine cannot act on gets its own message ("No known action matches
that input.", "Ambiguous request: ..." with numbered choices, which the next
input answers, or "Unknown action. ..." when it does not), `valid=False`, and
that message's first words in `checks.must_include`.

Revealed facts (adapters.base): the names of the objects the engine can refer
to where the agent is (its possible objects) that an observation mentions for
the first time, e.g. a room's contents on its first "look around", and a
location nothing shown so far names (rare: a move names its room, and a
room's doors name its neighbours). In what a prediction invents, a listing's
lines (a room's contents, one a tab-indented line) must each name a thing
(the engine lists most with an article, some substances bare: "soil"), and
a room description ("This room is called the X.") must describe the status
line's location.
"""

from __future__ import annotations

import random
import re
import zlib
from collections.abc import Mapping

from scienceworld import ScienceWorldEnv as _Engine
from scienceworld.constants import TASKS as _TASKS

from mdlm_wm.data.schema import Spec, Step
from mdlm_wm.envs.adapters.base import RealEnv, check_split, render_state, same_value
from mdlm_wm.envs.base import StepResult

SIMPLIFICATION = "easy"
# The engine's answers to input it does not act on; only these mark an action
# invalid (an action the engine acts on that changes nothing, e.g. "The door is
# already open.", is a valid move of the world).
_NOT_ACTED_ON = ("No known action matches that input.", "Ambiguous request", "Unknown action.")
_PLACE = re.compile(r"This [a-z ]*? is called the ([^.]+)\.")
_ARTICLE = re.compile(r"^(?:a|an|the|some)\s+", re.IGNORECASE)
# Where an inventory item's name ends: its details follow a period, comma or
# parenthesis, or (an engine quirk: "a orange wireits terminal 1 is ...") its
# electrical connections follow without a separator.
_ITEM_END = re.compile(r"[.,(]|its (?:anode|cathode|terminal)")
_GIBBERISH = ("fly to the moon", "pick up unicorn", "open the sky", "sing loudly", "xyzzy",
              "focus", "move to", "pour")
# A step limit the engine never reaches: the adapter decides when an episode stops.
_NO_STEP_LIMIT = 10**9


def _inventory(text: str) -> str:
  """The engine's inventory text as sorted item names, or "nothing"."""
  items = []
  for line in text.splitlines()[1:]:
    name = _ITEM_END.split(_ARTICLE.sub("", line.strip()))[0].strip()
    if name:
      items.append(name)
  return ", ".join(sorted(items)) or "nothing"


def _location(look: str) -> str:
  m = _PLACE.search(look)
  return m.group(1) if m else "unknown"


def _task_text(description: str) -> str:
  """The engine's task description less its "Task Description:" header."""
  return re.sub(r"^\s*Task Description:\s*", "", description).strip()


class ScienceWorldEnv(RealEnv):
  """One ScienceWorld task; seeds are its variations (see the module docstring)."""

  family = "scienceworld"
  requires = "scienceworld"
  max_steps = 200

  def __init__(self, task: str, *, reuse_jvm: bool = False):
    super().__init__(task)
    self._reuse_jvm = reuse_jvm
    self._engine: _Engine | None = None
    self._splits: dict[str, list[int]] | None = None
    self._gold: list[str] = []
    self._gold_next = 0
    self._score = 0
    # The valid actions of the current state, listed on first request (see _move).
    self._valid: list[str] | None = None

  @classmethod
  def tasks(cls) -> list[str]:
    return sorted(t["task_name"] for t in _TASKS)

  # ---- engine

  def _started(self) -> _Engine:
    if self._engine is None:
      self._engine = _Engine("", envStepLimit=_NO_STEP_LIMIT)
    return self._engine

  def close(self) -> None:
    if self._engine is not None:
      self._engine.close()
      self._engine = None

  def split_seeds(self, split: str) -> list[int]:
    check_split(split)
    if self._splits is None:
      engine = self._started()
      # The variation lists are the loaded task's; any variation will do.
      engine.load(self.task, 0, SIMPLIFICATION)
      self._splits = {"train": sorted(engine.get_variations_train()),
                      "valid": sorted(engine.get_variations_dev()),
                      "test": sorted(engine.get_variations_test())}
    return list(self._splits[split])

  def _move(self, action: str) -> tuple[str, int, bool]:
    """One engine move: (observation, score, done), as `ScienceWorldEnv.step` computes them.

    The wrapper's `step` also lists every valid action/object combination, ~90% of
    a step's time (measured ~450 of ~500 ms); only the random policy needs them,
    so the adapter moves through the wrapper's `server` and lists them on demand.
    """
    server = self._engine.server
    obs = server.step(action)
    score = int(round(100 * server.getScore()))
    self._valid = None
    # A negative score is the engine's failure signal; the wrapper ends the episode on it too.
    return obs, score, bool(server.getCompleted()) or score < 0

  # ---- episode

  def reset(self, seed: int, steer: str | None = None) -> tuple[Spec, str]:
    steer = self.resolve_steer(seed, steer)
    if not self._reuse_jvm:
      self.close()
    engine = self._started()
    n = engine.get_max_variations(self.task)
    if not 0 <= seed < n:
      raise ValueError(f"{self.name} has variations 0..{n - 1}; got seed {seed}")
    # scala.util.Random, the generator the engine's tasks share, reached by reflection.
    shared = engine.server.getClass().getClassLoader().loadClass("scala.util.Random$")
    shared.getField("MODULE$").get(None).setSeed(zlib.crc32(f"{self.name}/{seed}".encode()))
    engine.load(self.task, seed, SIMPLIFICATION, generateGoldPath=True)
    engine.server.reset()
    # The engine's reset is its first move, "look around".
    obs, self._score, _ = self._move("look around")
    self._gold = list(engine.get_gold_action_sequence())
    self._gold_next = 0
    first = render_state(obs, self._facts())
    self.start_record(first)
    spec = Spec(initial_state=first, task=_task_text(engine.taskdescription()), tools=(),
                rules=self._rules(engine), steer=steer)
    return spec, first

  @staticmethod
  def _rules(engine: _Engine) -> tuple[str, ...]:
    templates = ", ".join(a for a in engine.get_possible_actions() if a != "reset task")
    return (f"Action templates (OBJ is an object, room or substance): {templates}.",
            "Each next state ends with [location | score | inventory]: the place, the task "
            "score (0-100; -100 when the task has failed) and the carried items.")

  def _facts(self) -> dict[str, str]:
    return {"location": _location(self._engine.look()), "score": str(self._score),
            "inventory": _inventory(self._engine.inventory())}

  def step(self, action: str) -> StepResult:
    if self._gold_next < len(self._gold) and action == self._gold[self._gold_next]:
      self._gold_next += 1
    obs, score, done = self._move(action)
    reward = (score - self._score) / 100.0
    self._score = score
    facts = self._facts()
    error = next((e for e in _NOT_ACTED_ON if obs.strip().startswith(e)), None)
    checks = self.step_checks(action, obs, facts, (error,) if error else ())
    return StepResult(render_state(obs, facts), reward, done, checks, error is None,
                      {"success": done and score == 100, "score": score})

  def names(self) -> list[str]:
    return list(self._engine.get_possible_objects())

  @classmethod
  def listing_constraints(cls, spec: Spec, step: Step, body: str,
                          status: Mapping[str, str]) -> dict[str, bool]:
    """Each listed thing (a tab-indented line) is named; a room described is the status line's."""
    lines = [line.strip() for line in body.splitlines() if line.startswith("\t")]
    room = _PLACE.search(body)
    return {"objects:named": all(line[:1].isalpha() for line in lines),
            "objects:room": room is None or same_value(room.group(1), status.get("location", ""))}

  # ---- policies

  def expert_action(self) -> str:
    if self._gold_next < len(self._gold):
      return self._gold[self._gold_next]
    return "look around"

  def random_action(self, rng: random.Random) -> str:
    return rng.choice(self.admissible_actions() or ["look around"])

  def invalid_action(self, rng: random.Random) -> str:
    return rng.choice(_GIBBERISH)

  def admissible_actions(self) -> list[str] | None:
    if self._valid is None:
      combos = self._engine.get_valid_action_object_combinations()
      self._valid = sorted(a for a in combos if a != "reset task")
    return list(self._valid)
