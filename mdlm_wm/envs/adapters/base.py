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
  passes its own checks and a prediction is scored on facts, not wording.

A bad action never raises: the engine's own error text becomes the
observation and `StepResult.valid` is False.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import ClassVar

from mdlm_wm.checks import generic
from mdlm_wm.data.schema import Spec, Step
from mdlm_wm.envs import base

SPLITS = ("train", "valid", "test")


def status_line(facts: Mapping[str, str]) -> str:
  """`[key: value | ...]` in the given key order: the text form of the facts
  in `checks.fields`, which the generic checker finds as `key: value`."""
  return "[" + " | ".join(f"{k}: {v}" for k, v in facts.items()) + "]"


def render_state(observation: str, facts: Mapping[str, str]) -> str:
  """A next state: the engine's observation, then the status line."""
  return f"{observation.strip()}\n{status_line(facts)}"


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

  @staticmethod
  def state_check(spec: Spec, step: Step, prediction: str) -> float:
    """The generic checker on the step's facts (status line + must_include)."""
    if not isinstance(prediction, str):
      return 0.0
    return generic.check_score(step.checks, prediction)


def check_split(split: str) -> None:
  if split not in SPLITS:
    raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")


def seed_ranges(n: int, fractions: Sequence[float] = (0.8, 0.1, 0.1)) -> dict[str, range]:
  """Disjoint seed ranges over [0, n) for engines without their own splits."""
  n_train = max(1, int(n * fractions[0]))
  n_valid = max(1, int(n * fractions[1]))
  return {"train": range(0, n_train), "valid": range(n_train, n_train + n_valid),
          "test": range(n_train + n_valid, n)}
