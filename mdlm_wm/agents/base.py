"""The agent protocol: (task, history, observation) -> action text.

An agent sees what a player of the environment sees: the spec (task, tools,
rules, ...), the (observation, action) pairs of the episode so far and the
current observation. It never sees the environment's hidden state, so the
same agent acts in the real environment and inside a world model.

    agent.act(spec, history, observation, num_samples=4, seed=0)  # 4 actions
    agent.act_batch([Turn(spec, history, observation), ...])      # one call

`CallableAgent(fn)` plugs in any Python policy, e.g. an LLM behind an API.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import NamedTuple, TypeVar

from mdlm_wm.data.schema import Spec

History = tuple[tuple[str, str], ...]  # (observation, action taken in it), oldest first
T = TypeVar("T")


class Turn(NamedTuple):
  """What an agent sees when it must act."""
  spec: Spec
  history: History
  observation: str


class Agent(abc.ABC):
  """Maps turns to action texts; `act_batch` is the one method to implement."""

  @abc.abstractmethod
  def act_batch(self, turns: Sequence[Turn], *, num_samples: int = 1,
                seed: int = 0) -> list[list[str]]:
    """`num_samples` actions for each turn: [len(turns)][num_samples]."""

  def act(self, spec: Spec, history: Sequence[tuple[str, str]], observation: str, *,
          num_samples: int = 1, seed: int = 0) -> list[str]:
    """`num_samples` actions for one turn."""
    turn = Turn(spec, tuple(tuple(pair) for pair in history), observation)
    return self.act_batch([turn], num_samples=num_samples, seed=seed)[0]


class CallableAgent(Agent):
  """An agent from `fn(spec, history, observation) -> action`.

  The callable owns its randomness (`seed` is not passed on): `num_samples`
  actions are `num_samples` calls.
  """

  def __init__(self, fn: Callable[[Spec, History, str], str]):
    self.fn = fn

  def act_batch(self, turns: Sequence[Turn], *, num_samples: int = 1,
                seed: int = 0) -> list[list[str]]:
    del seed
    return [[str(self.fn(t.spec, t.history, t.observation)) for _ in range(num_samples)]
            for t in turns]


def pad_to_bucket(items: Sequence[T]) -> list[T]:
  """`items` padded with copies of its last item to the next power of two.

  A model-backed agent or world model calls its jitted sampler with the rows
  of the episodes still running; bucketing bounds the recompiles to
  log2(rows) shapes as episodes finish. Callers drop the padded rows' outputs.
  """
  if not items:
    raise ValueError("nothing to pad")
  size = 1 << (len(items) - 1).bit_length()
  return list(items) + [items[-1]] * (size - len(items))
