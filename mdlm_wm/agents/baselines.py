"""Reference agents that cheat: the environment's own expert and random policies.

Both keep a private copy of the real environment in step with the episode by
replaying its actions (from the seed found by the episode's spec), then ask
that copy for `expert_action()` or `random_action()`. They bound what a
learned agent can reach (ExpertAgent) and what chance reaches (RandomAgent),
in the real environment or inside a world model (where they act on the real
consequences of their actions, whatever the world model predicted).
"""

from __future__ import annotations

import abc
import random
from collections.abc import Sequence

from mdlm_wm import envs
from mdlm_wm.agents.base import Agent, History, Turn
from mdlm_wm.data.schema import Spec


def _key(spec: Spec) -> tuple[str, str, str]:
  # Spec holds dicts (tool schemas), so it is not hashable itself.
  return spec.initial_state, spec.task, spec.steer


class _ReplayAgent(Agent):
  """Finds each turn's task among `tasks` (env name, seed) and replays its history."""

  def __init__(self, tasks: Sequence[tuple[str, int]]):
    self._task_of: dict[tuple[str, str, str], tuple[str, int]] = {}
    for name, seed in tasks:
      spec, _ = envs.make(name).reset(seed)
      self._task_of[_key(spec)] = (name, seed)
    # Per task: the live copy and the actions it has taken, so consecutive
    # turns of an episode cost one step each instead of a full replay.
    self._live: dict[tuple[str, str, str], tuple[envs.Env, list[str]]] = {}

  def _env_at(self, spec: Spec, history: History) -> envs.Env:
    key = _key(spec)
    if key not in self._task_of:
      raise KeyError(f"task {spec.task[:60]!r} is not among the {len(self._task_of)} tasks "
                     "this agent was built for")
    actions = [a for _, a in history]
    env, taken = self._live.get(key, (None, []))
    if env is None or actions[:len(taken)] != taken:
      name, seed = self._task_of[key]
      env, taken = envs.make(name), []
      env.reset(seed)
    for action in actions[len(taken):]:
      env.step(action)
    self._live[key] = (env, actions)
    return env

  def act_batch(self, turns: Sequence[Turn], *, num_samples: int = 1,
                seed: int = 0) -> list[list[str]]:
    return [[self._action(self._env_at(t.spec, t.history), t, seed, k)
             for k in range(num_samples)] for t in turns]

  @abc.abstractmethod
  def _action(self, env: envs.Env, turn: Turn, seed: int, k: int) -> str:
    """Sample k of the action at `turn`, from the copy `env` that is at that turn."""


class ExpertAgent(_ReplayAgent):
  """The environment's expert (it replans from the current state)."""

  def _action(self, env: envs.Env, turn: Turn, seed: int, k: int) -> str:
    del turn, seed, k
    return env.expert_action()


class RandomAgent(_ReplayAgent):
  """The environment's random policy, seeded by (seed, task, step, sample)."""

  def _action(self, env: envs.Env, turn: Turn, seed: int, k: int) -> str:
    rng = random.Random(f"{seed}/{turn.spec.task}/{len(turn.history)}/{k}")
    return env.random_action(rng)
