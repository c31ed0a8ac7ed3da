"""Episodes of an agent in a simulator: the real environment or a world model.

One loop serves evaluation (real environments) and agent GRPO (either
backend): at each time step, one batched agent call over the episodes still
running, then one batched simulator call with their actions. An episode ends
when the simulator says done (the task is solved, or the environment ended
it), at its step limit, or on an error. An error is logged and recorded on
its episode (`error` = "agent: ..." or "env: ...") and never stops the others.
"""

from __future__ import annotations

import collections
import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
from absl import logging

from mdlm_wm import envs
from mdlm_wm.agents.base import Agent, Turn, pad_to_bucket
from mdlm_wm.agents.success import SuccessFn
from mdlm_wm.data.schema import Spec
from mdlm_wm.data.serialize import Transition
from mdlm_wm.world_model import WorldModel


def derive_seed(*parts: int) -> int:
  """A 32-bit seed from integers (run seed, step, time step, ...): nearby
  tuples give unrelated streams."""
  return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1)[0])


@dataclasses.dataclass
class Episode:
  """One episode in progress: what the agent has seen and done, and how it went."""
  task: str  # environment name
  seed: int
  spec: Spec
  observation: str
  max_steps: int
  env: envs.Env | None = None  # the live environment, when it steps the episode
  history: list[tuple[str, str]] = dataclasses.field(default_factory=list)
  score: float = 0.0  # sum of rewards
  done: bool = False
  success: bool = False
  error: str | None = None

  @property
  def steps(self) -> int:
    return len(self.history)

  def turn(self) -> Turn:
    return Turn(self.spec, tuple(self.history), self.observation)


@dataclasses.dataclass(frozen=True)
class Outcome:
  next_state: str
  reward: float
  done: bool
  success: bool


class Simulator(Protocol):
  def step(self, episodes: Sequence[Episode], actions: Sequence[str],
           seed: int) -> list[Outcome | Exception]:
    """The outcome of each episode's action (or the exception it raised)."""


class RealSimulator:
  """Each episode's own live environment steps it; success as the
  environment reports it (`info["success"]`, else a positive final reward)."""

  def step(self, episodes: Sequence[Episode], actions: Sequence[str],
           seed: int) -> list[Outcome | Exception]:
    del seed
    out: list[Outcome | Exception] = []
    for ep, action in zip(episodes, actions):
      try:
        res = ep.env.step(action)
      except Exception as e:  # pylint: disable=broad-except
        # An engine crash ends this episode only.
        out.append(e)
        continue
      success = bool(res.done and res.info.get("success", res.reward > 0))
      out.append(Outcome(res.next_state, float(res.reward), bool(res.done), success))
    return out


class WorldModelSimulator:
  """A world model predicts every next state, one batched call per time step;
  `success_of(env)` judges each (reward 1 and done when it says solved). A
  predicate that raises is logged and read as not solved."""

  def __init__(self, world: WorldModel, success_of: Callable[[str], SuccessFn],
               **sample_overrides):
    self.world, self.success_of, self.sample_overrides = world, success_of, sample_overrides

  def step(self, episodes: Sequence[Episode], actions: Sequence[str],
           seed: int) -> list[Outcome | Exception]:
    transitions = pad_to_bucket([Transition(ep.spec, tuple(ep.history), ep.observation, action)
                                 for ep, action in zip(episodes, actions)])
    states = self.world.generate(transitions, num_samples=1, seed=seed,
                                 **self.sample_overrides)[:len(episodes)]
    out: list[Outcome | Exception] = []
    for ep, (state,) in zip(episodes, states):
      try:
        solved = bool(self.success_of(ep.task)(ep.spec, state))
      except Exception as e:  # pylint: disable=broad-except
        logging.warning("success predicate of %s raised %r; read as not solved", ep.task, e)
        solved = False
      out.append(Outcome(state, float(solved), solved, solved))
    return out


Act = Callable[[Sequence[Episode], int], list]  # (running episodes, t) -> action or exception each


def agent_act(agent: Agent, seed: int) -> Act:
  """`agent` as an Act: one act_batch call per time step; when it raises, the
  turns are retried one by one so that only the failing episodes end."""

  def act(live: Sequence[Episode], t: int) -> list:
    turns = [ep.turn() for ep in live]
    step_seed = derive_seed(seed, t)
    try:
      return [actions[0] for actions in agent.act_batch(turns, num_samples=1, seed=step_seed)]
    except Exception as e:  # pylint: disable=broad-except
      logging.warning("act_batch raised %r; retrying its %d turns one by one", e, len(turns))
    out = []
    for turn in turns:
      try:
        out.append(agent.act_batch([turn], num_samples=1, seed=step_seed)[0][0])
      except Exception as e:  # pylint: disable=broad-except
        out.append(e)
    return out

  return act


def run_episodes(episodes: Sequence[Episode], act: Act, simulator: Simulator, *,
                 seed: int) -> dict[str, float]:
  """Plays `episodes` to their ends; returns seconds spent acting
  (`time_agent`) and simulating (`time_world`)."""
  times = {"time_agent": 0.0, "time_world": 0.0}
  for t in range(max((ep.max_steps for ep in episodes), default=0)):
    live = [ep for ep in episodes if not ep.done and ep.steps < ep.max_steps]
    if not live:
      break
    t0 = time.perf_counter()
    actions = act(live, t)
    t1 = time.perf_counter()
    acting = []
    for ep, action in zip(live, actions):
      if isinstance(action, BaseException):
        _fail(ep, "agent", action)
      else:
        acting.append((ep, action))
    outcomes = simulator.step([ep for ep, _ in acting], [a for _, a in acting],
                              derive_seed(seed, t)) if acting else []
    for (ep, action), out in zip(acting, outcomes):
      if isinstance(out, BaseException):
        _fail(ep, "env", out)
        continue
      ep.history.append((ep.observation, action))
      ep.observation, ep.done, ep.success = out.next_state, out.done, out.success
      ep.score += out.reward
    times["time_agent"] += t1 - t0
    times["time_world"] += time.perf_counter() - t1
  return times


def _fail(ep: Episode, source: str, error: BaseException) -> None:
  logging.warning("%s seed %d step %d: %s error %r; the episode ends", ep.task, ep.seed,
                  ep.steps, source, error)
  ep.done, ep.error = True, f"{source}: {error!r}"


class EnvPool:
  """Environments by name, created on first use and kept: real engines (a
  JVM, a game process) are slow to start, so a run reuses them across steps."""

  def __init__(self):
    self._envs: dict[str, list[envs.Env]] = collections.defaultdict(list)

  def get(self, name: str, index: int = 0) -> envs.Env:
    while len(self._envs[name]) <= index:
      self._envs[name].append(envs.make(name))
    return self._envs[name][index]

  def start(self, tasks: Sequence[tuple[str, int]], *, live: bool,
            max_steps: int | None = None) -> list[Episode]:
    """One episode per (env name, seed). `live`: each gets its own environment,
    which will step it; else one environment per name only resets them (a
    world model steps them). `max_steps` None: each environment's own limit.
    A reset that raises gives an episode that is over, with its error."""
    used: collections.Counter = collections.Counter()
    out = []
    for name, seed in tasks:
      env = self.get(name, used[name] if live else 0)
      used[name] += 1
      limit = max_steps or env.max_steps
      try:
        spec, observation = env.reset(seed)
      except Exception as e:  # pylint: disable=broad-except
        ep = Episode(name, seed, Spec("", ""), "", limit)
        _fail(ep, "env", e)
        out.append(ep)
        continue
      out.append(Episode(name, seed, spec, observation, limit, env if live else None))
    return out

  def close(self) -> None:
    for pool in self._envs.values():
      for env in pool:
        close = getattr(env, "close", None)
        if close is not None:
          close()
    self._envs.clear()
