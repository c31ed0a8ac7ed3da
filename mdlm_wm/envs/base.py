"""The environment protocol and the policies that drive episodes.

Every environment, built-in or a real one behind an adapter, is an `Env`:
`reset(seed)` builds a hidden world and returns the spec and first
observation; `step(action)` advances it. Environments are deterministic given
the seed and the actions: all randomness comes from `random.Random` objects
seeded from the seed, never from global state or set/dict-of-hash ordering.
Environments are found by name in `envs/registry.py`, above every
environment module.
"""

from __future__ import annotations

import abc
import dataclasses
import random
from typing import Any, ClassVar

from mdlm_wm.checks.generic import generic_result
from mdlm_wm.checks.result import CheckResult
from mdlm_wm.data.schema import Checks, Episode, Spec, Step

POLICIES = ("expert", "noisy", "random")
# Fraction of seeds that get a steering instruction when none is forced.
STEERED_FRACTION = 0.35


@dataclasses.dataclass(frozen=True)
class StepResult:
  next_state: str
  reward: float
  done: bool
  # Facts about next_state derived from the hidden state, not from the text.
  checks: Checks
  # False when the action failed (unknown command, bad target, bad argument,
  # error status): the corpus counts these as failed actions.
  valid: bool
  info: dict[str, Any] = dataclasses.field(default_factory=dict)


class Env(abc.ABC):
  """A deterministic text environment with hidden state."""

  name: ClassVar[str]
  # Episodes stop after this many steps even if the task is not solved.
  max_steps: ClassVar[int] = 30
  # Steering instructions this environment understands; each changes the
  # dynamics in a way the checks can verify.
  steers: ClassVar[tuple[str, ...]] = ()

  @abc.abstractmethod
  def reset(self, seed: int, steer: str | None = None) -> tuple[Spec, str]:
    """Builds the world for `seed`; returns (spec, first observation).

    `steer=None` lets the seed decide whether (and which) steer is active;
    `""` forces none; any string from `steers` forces that one.
    """

  def resolve_steer(self, seed: int, steer: str | None) -> str:
    """The steer `reset` should use: the seed picks one for ~35% of seeds when
    `steer` is None; otherwise `steer` itself, which must be "" or known."""
    if steer is None:
      if not self.steers:
        return ""
      pick = random.Random(f"{self.name}/{seed}/steer")
      return pick.choice(self.steers) if pick.random() < STEERED_FRACTION else ""
    if steer and steer not in self.steers:
      raise ValueError(f"unknown steer {steer!r} for {self.name}; known: {list(self.steers)}")
    return steer

  @abc.abstractmethod
  def step(self, action: str) -> StepResult:
    """Applies an action (free text or a tool call) to the hidden state."""

  @abc.abstractmethod
  def expert_action(self) -> str:
    """The next action of a policy that solves the task from the current state."""

  @abc.abstractmethod
  def random_action(self, rng: random.Random) -> str:
    """A plausible action drawn from the action space; it may fail."""

  def change_of_intent(self, rng: random.Random) -> tuple[str, tuple[str, ...]] | None:
    """A user who changes intent now, for adversarial probes (eval/failures.py):
    (the user's new request, the actions that serve it in the current world),
    or None where the environment has no user or nothing to change to."""
    del rng
    return None

  def invalid_action(self, rng: random.Random) -> str:
    """An action that fails (bad target, bad argument); default: random."""
    return self.random_action(rng)

  @classmethod
  def state_check(cls, spec: Spec, step: Step, prediction: str) -> float:
    """Scores a predicted next state in [0, 1]: the fraction of `check`'s
    determined facts and constraints that hold (the reference scores 1.0)."""
    return cls.check(spec, step, prediction).score

  @classmethod
  def check(cls, spec: Spec, step: Step, prediction: str) -> CheckResult:
    """The structured check of a predicted next state: determined facts,
    revealed facts and constraints on revealed content (checks/result.py).

    Default: the generic `checks` split by `checks.revealed`. Environments
    override it with their own parser-based checker (`checks.generic.
    fact_entries` gives the entries every checker shares).
    """
    return generic_result(step.checks, prediction)

  def fork_hidden(self, stream: str) -> None:
    """From now on, draw every hidden fact not yet revealed from the random
    stream `stream` instead of the world's own (the twin world: it keeps
    everything revealed so far and re-draws the rest, envs/twin.py).

    Environments that support twins draw hidden content lazily, at the
    moment it is revealed, from a stream keyed by (seed, stream, what)."""
    raise NotImplementedError(f"{self.name} has no twin world")


def choose_action(env: Env, policy: str, rng: random.Random, noise: float) -> str:
  """One action of `policy`: expert, noisy (expert with `noise` bad moves) or random."""
  if policy == "expert":
    return env.expert_action()
  if policy == "noisy":
    if rng.random() < noise:
      return env.invalid_action(rng) if rng.random() < 0.5 else env.random_action(rng)
    return env.expert_action()
  if policy == "random":
    return env.random_action(rng)
  raise ValueError(f"unknown policy {policy!r}; expected one of {POLICIES}")


@dataclasses.dataclass(frozen=True)
class EpisodeStats:
  failed_actions: int
  success: bool


def run_episode(env: Env, seed: int, policy: str, *, noise: float = 0.3,
                steer: str | None = None, max_steps: int | None = None,
                episode_id: str | None = None) -> tuple[Episode, EpisodeStats]:
  """Plays one episode and returns it in the trajectory format (docs/schema.md), with counts."""
  spec, state = env.reset(seed, steer=steer)
  # The policy's own stream: decoupled from the world's so that the same seed
  # gives the same world under every policy.
  rng = random.Random(f"{env.name}/{seed}/{policy}")
  steps = []
  failed = 0
  success = False
  for _ in range(max_steps or env.max_steps):
    action = choose_action(env, policy, rng, noise)
    res = env.step(action)
    failed += not res.valid
    steps.append(Step(state=state, action=action, next_state=res.next_state,
                      reward=float(res.reward), done=bool(res.done), checks=res.checks))
    state = res.next_state
    if res.done:
      success = bool(res.info.get("success", res.reward > 0))
      break
  ep = Episode(
      id=episode_id or f"{env.name}/seed-{seed}/{policy}",
      env=env.name, spec=spec, steps=tuple(steps),
      meta={"policy": policy, "seed": seed, "success": success,
            "failed_actions": failed})
  return ep, EpisodeStats(failed, success)
