"""The protocol of real environments behind adapters (setup.py extra `envs`).

A real environment is a game engine the project does not own (TextWorld,
TextWorld-Express, ScienceWorld, ALFWorld's PDDL games). Its adapter is an
`Env` like the built-in simulators, so the corpus builder, the evaluation
suite and the GRPO rewards treat both alike, plus what real engines add:

* one adapter class per *family*; an instance plays one *task* of it, and its
  environment name is `family/task` (e.g. `scienceworld/boil`), the `env` field
  of the episodes it writes;
* `split_seeds(split)`: which seeds (games, variations) belong to train / valid
  / test; the engine's own splits where it has them (ScienceWorld's
  variations), disjoint seed ranges otherwise;
* `admissible_actions()` where the engine lists them;
* per-step rewards (engines that report a cumulative score are differenced);
* every next state ends with a status line rendered from the engine's own
  state, `[location: kitchen | score: 3 | inventory: apple, knife]`, and
  the step's `checks.fields` hold the same facts, so the reference next state
  passes its own checks and a prediction is scored on facts, not wording;
* determined vs revealed facts (issue 25): the status facts after an action
  are determined, except a location that nothing shown so far names (the
  first sight of a room the action does not name); the names of things an
  observation shows for the first time (a room's furniture, a container's
  contents, an object list) are revealed `must_include` items. "Shown so far"
  is every earlier observation of the episode and the action, so a fact is
  determined when the episode's history entails it (as in the built-in
  environments' twin worlds, which keep everything revealed so far);
* `check` grades the status facts and the engine's error line (determined),
  reports the revealed names, and holds invented content to constraints it
  can verify from the spec and the prediction: a newly seen room is new and
  named in the text, listed objects are well-formed (each adapter says how).

A bad action never raises: the engine's own error text becomes the
observation and `StepResult.valid` is False.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar

from mdlm_wm.checks import generic
from mdlm_wm.checks.result import FORMAT, CheckResult, parse_status_line
from mdlm_wm.data.schema import SPLITS, Checks, Spec, Step
from mdlm_wm.envs import base

_ARTICLED = re.compile(r"(?:a|an|the|some)\s+\S", re.IGNORECASE)
# A list's separators: "a, b, and c", "a and b".
_LIST_SEP = re.compile(r",\s*(?:and\s+)?|\s+and\s+")


def status_line(facts: Mapping[str, str]) -> str:
  """`[key: value | ...]` in the given key order: the text form of the facts
  in `checks.fields`, which the generic checker finds as `key: value`."""
  return "[" + " | ".join(f"{k}: {v}" for k, v in facts.items()) + "]"


def render_state(observation: str, facts: Mapping[str, str]) -> str:
  """A next state: the engine's observation, then the status line."""
  return f"{observation.strip()}\n{status_line(facts)}"


def mentions(text: str, name: str) -> bool:
  """True if `text` names `name` as whole words, case-insensitively (`key`
  is not in `keyboard`, `apple 1` not in `apple 10`)."""
  pattern = rf"(?<!\w){re.escape(name)}(?!\w)"
  return bool(name) and re.search(pattern, text, re.IGNORECASE) is not None


def same_value(predicted: str | None, reference: str) -> bool:
  """Status values agree as lists: items compared case- and order-insensitively
  (`inventory: knife, apple` states `apple, knife`), whitespace normalized."""
  items = lambda v: sorted(" ".join(x.split()).lower() for x in v.split(","))
  return predicted is not None and items(predicted) == items(reference)


def list_items(text: str) -> list[str]:
  """The items of an engine's list ("a knife, a fork, and a spoon")."""
  return [item.strip() for item in _LIST_SEP.split(text.strip()) if item.strip()]


def articled(items: Iterable[str]) -> bool:
  """Every item is a noun phrase as the engines list them: an article, then a name."""
  return all(_ARTICLED.match(item) for item in items)


def body_of(prediction: str) -> str:
  """A state's text before its trailing status line (the caller parsed one)."""
  return prediction[:prediction.rstrip().rfind("[")]


def fact_result(checks: Checks, prediction: str,
                status: Mapping[str, str] | None) -> CheckResult:
  """The step's facts against a prediction and its parsed status line: a
  `format` fact (the line parses and has every field), one entry per field
  (`field:K`, compared with `same_value`), per `must_include` item and per
  `must_exclude` item (substrings, case-insensitive), each revealed or
  determined as `checks.revealed` says."""
  entries = generic.fact_entries(
      checks, prediction, lambda k, v: status is not None and same_value(status.get(k), v))
  well_formed = status is not None and all(k in status for k in checks.fields)
  return CheckResult({FORMAT: well_formed, **entries.determined}, entries.revealed, {})


class RealEnv(base.Env):
  """An `Env` that plays one task of a real engine (see the module docstring)."""

  # The family name (`textworld_express`) and the pip package(s) it needs,
  # named in the error when they are missing.
  family: ClassVar[str]
  requires: ClassVar[str]

  def __init__(self, task: str):
    if task not in self.tasks():
      raise KeyError(f"unknown {self.family} task {task!r}; known: {', '.join(self.tasks())}")
    self.task = task
    # An instance attribute: `Env.name` is a class attribute for built-ins.
    self.name = f"{self.family}/{task}"

  @classmethod
  @abc.abstractmethod
  def tasks(cls) -> list[str]:
    """Every task of the family (ScienceWorld's 30 tasks, TWX's games, ...)."""

  @abc.abstractmethod
  def split_seeds(self, split: str) -> list[int]:
    """The seeds (games, variations) of `split` in `SPLITS`; disjoint across splits."""

  def admissible_actions(self) -> list[str] | None:
    """The actions the engine says are valid now, or None if it does not say."""
    return None

  def close(self) -> None:
    """Releases the engine (a JVM, a game process); the env may not be used after."""

  # ---- what the episode has shown, and the checks it gives

  def names(self) -> Iterable[str]:
    """Names of the world's things (objects, containers, doors; hidden ones too):
    those an observation mentions for the first time are revealed."""
    return ()

  def start_record(self, first_state: str) -> None:
    """Starts the record of what the episode's observations have shown (at reset)."""
    self._shown = first_state
    # Names found in `_shown`: each is looked for in the growing text until found, not every step.
    self._found: set[str] = set()

  def _was_shown(self, text: str) -> bool:
    if text not in self._found and mentions(self._shown, text):
      self._found.add(text)
    return text in self._found

  def step_checks(self, action: str, observation: str, facts: Mapping[str, str],
                  must_include: Sequence[str] = ()) -> Checks:
    """A step's checks: the status facts and `must_include` (determined), plus
    as revealed facts the names the observation mentions that neither an
    earlier observation nor the action did, and the location when neither
    names it. Records the observation as shown."""
    self._shown = f"{self._shown}\n{action}"
    new = tuple(n for n in sorted(set(self.names()))
                if mentions(observation, n) and not self._was_shown(n) and n not in must_include)
    location = facts.get("location")
    revealed = new + (("location",) if location and not self._was_shown(location) else ())
    self._shown = f"{self._shown}\n{render_state(observation, facts)}"
    return Checks(must_include=tuple(must_include) + new, fields=dict(facts), revealed=revealed)

  # ---- the checker

  # The form in which an engine names the room it describes (group 1); None:
  # any mention in the text.
  room_form: ClassVar[re.Pattern | None] = None

  @classmethod
  def check(cls, spec: Spec, step: Step, prediction: str) -> CheckResult:
    """Status facts and the engine's error line (determined), names seen for
    the first time (revealed), and the constraints on invented content."""
    text = prediction if isinstance(prediction, str) else ""
    status = parse_status_line(text)
    result = fact_result(step.checks, text, status)
    if status is None:
      return result
    constraints = {}
    if step.checks.is_revealed_field("location"):
      constraints.update(cls.location_constraints(spec, step, body_of(text),
                                                  status.get("location", "")))
    if any(step.checks.is_revealed_include(item) for item in step.checks.must_include):
      constraints.update(cls.listing_constraints(spec, step, body_of(text), status))
    return result.merged(CheckResult(constraints=constraints))

  @classmethod
  def location_constraints(cls, spec: Spec, step: Step, body: str,
                           location: str) -> dict[str, bool]:
    """A room seen for the first time: it is not a room the spec or s_t were in
    (`location:new`), and the text names it (`location:named`)."""
    earlier = [parse_status_line(s) or {} for s in (spec.initial_state, step.state)]
    new = bool(location) and not any(same_value(e.get("location"), location) for e in earlier)
    if cls.room_form is None:
      named = mentions(body, location)
    else:
      m = cls.room_form.search(body)
      named = bool(m) and same_value(m.group(1), location)
    return {"location:new": new, "location:named": bool(location) and named}

  @classmethod
  def listing_constraints(cls, spec: Spec, step: Step, body: str,
                          status: Mapping[str, str]) -> dict[str, bool]:
    """Rules on the objects a step shows for the first time (none by default)."""
    return {}


def check_split(split: str) -> None:
  if split not in SPLITS:
    raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")


def seed_ranges(n: int, fractions: Sequence[float] = (0.8, 0.1, 0.1)) -> dict[str, range]:
  """Disjoint seed ranges over [0, n) for engines without their own splits."""
  n_train = max(1, int(n * fractions[0]))
  n_valid = max(1, int(n * fractions[1]))
  return {"train": range(0, n_train), "valid": range(n_train, n_train + n_valid),
          "test": range(n_train + n_valid, n)}
