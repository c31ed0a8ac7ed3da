"""Gymnasium environments over a world model: the agent acts, the model answers.

    wm = WorldModel.load("/tmp/mdlm_wm_quickstart/mdlm")
    env = WorldModelEnv(wm, "/tmp/mdlm_wm_quickstart/data/test.jsonl", max_steps=10)
    obs, info = env.reset(seed=0)          # obs: the drawn spec's initial state
    obs, reward, terminated, truncated, info = env.step("look around")
    print(info["spec"].task)

    envs = WorldModelVectorEnv(wm, "/tmp/.../test.jsonl", max_steps=10, num_envs=8)
    obs_tuple, infos = envs.reset(seed=0)  # sub-env i is WorldModelEnv reset with seed 0 + i
    obs_tuple, rewards, terminated, truncated, infos = envs.step(actions)  # ONE sampler call

Observations and actions are text (`gymnasium.spaces.Text`). The charset is
every character the tokenizer's pieces decode to, plus U+FFFD; an
observation character outside it (only possible when the model spells a rare
character as raw bytes, or a spec brings one) shows as U+FFFD, while the
model keeps conditioning on the exact text. The observation's max_length
bounds what the model can write (canvas tokens times the longest piece) and
what it can read (context tokens times the longest piece).

"Done" for a text state: the world model predicts text only (the trajectory format's `done`
flag is not part of its target), so termination is a predicate on the
predicted next state: a regex searched in it, or a callable (spec, text) ->
bool. The default is the task-success predicate of the episode's environment,
`mdlm_wm.agents.success.default_success_fn(env)` (the status-line facts each
built-in environment prints, e.g. household `progress: 2/2`, lab `task: done`;
proxies for shop and calendar; `generic_success` when the environment is
unknown, e.g. for a list of Specs). `never_done` leaves only truncation at
`max_steps` to end an episode. The default reward is 1.0 on termination.

Randomness: `reset(seed=s)` seeds `np_random`, which draws the episode's spec
and its episode seed; step k samples with seed hash(episode seed, k) as a
per-transition seed (`WorldModel.generate(seed=[...])`), so an environment's
sampling noise depends on its own seed and step only. The vector environment
therefore puts all sub-environments' transitions into one sampler call and
still matches stepping each `WorldModelEnv` alone (tests/test_gym_env.py
checks it exactly, contexts padded to different widths included; it assumes
a row's logits do not change with the batch's padding beyond rounding that
never flips a draw).

Where the episode's environment is known (a trajectory file's spec, or
options["env"]), a next state that does not parse as that environment's state
is drawn again, up to the model's `sample.format_retries` times
(WorldModel.redraw, seeded from the step's seed, so batching still changes
nothing).

What `gymnasium.utils.env_checker.check_env` checks that does not apply to
text spaces: `check_space_limit` (Box bounds) has nothing to check; there is
no `render` (the observation already is the text), and the "render modes"
check needs a registered `EnvSpec` (it warns without one);
`spaces.flatten` and the wrappers built on it (FlattenObservation,
normalisation) do not support Text; `action_space.sample()` draws random
characters, which the environment accepts as an (unhelpful) action.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from mdlm_wm.agents.success import default_success_fn
from mdlm_wm.data import schema
from mdlm_wm.data.schema import Spec
from mdlm_wm.data.serialize import Transition
from mdlm_wm.data.tokenizer import Tokenizer
from mdlm_wm.envs.score import format_check
from mdlm_wm.world_model import Accept, WorldModel

History = tuple[tuple[str, str], ...]
# reward_fn(spec, history before this step, state, action, next_state) -> reward
RewardFn = Callable[[Spec, History, str, str, str], float]
DonePredicate = Callable[[Spec, str], bool]

REPLACEMENT_CHAR = "\ufffd"


def never_done(spec: Spec, text: str) -> bool:
  """A `done` that never fires: episodes end by truncation only."""
  return False


def done_predicate(done: str | re.Pattern | DonePredicate) -> DonePredicate:
  """A (spec, next_state) -> bool predicate from a regex (searched) or a callable."""
  if isinstance(done, (str, re.Pattern)):
    pattern = re.compile(done)
    return lambda spec, text: pattern.search(text) is not None
  return done


# ------------------------------------------------------------------ specs


@dataclasses.dataclass(frozen=True)
class SpecPool:
  """Where episodes' specs come from: a fixed pool drawn uniformly, or a callable.

  `pool` holds (spec, environment name) pairs; the name is "" when unknown.
  """
  pool: tuple[tuple[Spec, str], ...] = ()
  fn: Callable[[np.random.Generator], Spec] | None = None

  @classmethod
  def of(cls, source: SpecSource) -> SpecPool:
    """From a SpecPool, a list of Spec, a trajectory JSONL path or a callable(rng) -> Spec."""
    if isinstance(source, SpecPool):
      return source
    if isinstance(source, (str, os.PathLike)):
      pool = tuple((ep.spec, ep.env) for ep in schema.iter_episodes(source))
    elif callable(source):
      return cls(fn=source)
    else:
      pool = tuple((spec, "") for spec in source)
      if not all(isinstance(spec, Spec) for spec, _ in pool):
        raise TypeError("a spec_source sequence must hold Spec objects")
    if not pool:
      raise ValueError(f"spec_source {source!r} holds no spec")
    return cls(pool=pool)

  def draw(self, rng: np.random.Generator) -> tuple[Spec, str]:
    if self.fn is None:
      return self.pool[int(rng.integers(len(self.pool)))]
    spec = self.fn(rng)
    if not isinstance(spec, Spec):
      raise TypeError(f"spec_source returned {type(spec).__name__}, expected a Spec")
    return spec, ""


SpecSource = SpecPool | Sequence[Spec] | str | os.PathLike | Callable[[np.random.Generator], Spec]


# ------------------------------------------------------------------ text spaces


def tokenizer_charset(tokenizer: Tokenizer) -> str:
  """Every character a piece decodes to, plus U+FFFD, sorted (so that a seeded
  `Text.sample` draws the same strings in every process)."""
  chars = {REPLACEMENT_CHAR}
  for i in range(tokenizer.vocab_size):
    chars.update(tokenizer.decode([i]))
  return "".join(sorted(chars))


def longest_piece(tokenizer: Tokenizer) -> int:
  """Characters in the longest decoded piece: the most text one token can add."""
  return max(len(tokenizer.decode([i])) for i in range(tokenizer.vocab_size))


def step_seed(episode_seed: int, step: int) -> int:
  """Sampler seed of step `step`: a hash of both, so nearby seeds share no stream."""
  return int(np.random.SeedSequence([episode_seed, step]).generate_state(1)[0])


class _Request(NamedTuple):
  """One pending transition of one environment."""
  transition: Transition
  steer: str | None
  seed: int
  accept: Accept | None = None  # the environment's parser, when its name is known


def _predict(wm: WorldModel, requests: Sequence[_Request], overrides: Mapping[str, Any]
             ) -> list[str]:
  """Next states for `requests`: one sampler call, each row drawn with its own seed."""
  texts = wm.generate([r.transition for r in requests], num_samples=1,
                      seed=[r.seed for r in requests], steers=[r.steer for r in requests],
                      accept=[r.accept for r in requests], **overrides)
  return [row[0] for row in texts]


# ------------------------------------------------------------------ the environment


class WorldModelEnv(gymnasium.Env):
  """An episode inside a world model: spec drawn at reset, next states predicted.

  Args:
    world_model: a loaded `WorldModel` (MDLM or AR).
    spec_source: a list of Spec, a trajectory JSONL path (every episode's spec,
      with its `env` name in `info["env"]`), a callable(np_random) -> Spec,
      or a `SpecPool`.
    reward_fn: (spec, history, state, action, next_state) -> float; history
      holds the (state, action) pairs before `state`. Default: 1.0 when the
      step terminates the episode, else 0.0.
    max_steps: the episode is truncated after this many steps.
    done: when an episode terminates, as a regex searched in the next state
      or a callable (spec, next_state) -> bool; None: the success predicate
      of the episode's environment (module docstring).
    steer: overrides every spec's steer z ("" removes it; None keeps it).
    max_action_length: the action space's max_length in characters.
    sample_overrides: sampler settings for every step (temperature, steps, ...).

  `reset(options=...)` accepts "spec" (a Spec to use instead of the drawn one;
  the draw still happens, so the random stream does not depend on options)
  with "env" (its environment's name, for the default `done`), and "steer"
  (this episode's steer override). `info` holds the spec, the
  environment name, the step index, the episode seed and (after a step) the
  sampler seed of that step.
  """

  def __init__(self, world_model: WorldModel, spec_source: SpecSource,
               reward_fn: RewardFn | None = None, max_steps: int = 20, *,
               done: str | re.Pattern | DonePredicate | None = None,
               steer: str | None = None, max_action_length: int = 1024,
               sample_overrides: Mapping[str, Any] | None = None):
    if max_steps < 1:
      raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    self.world_model = world_model
    self.specs = SpecPool.of(spec_source)
    self.max_steps = max_steps
    self.done = None if done is None else done_predicate(done)
    self.reward_fn = reward_fn
    self.steer = steer
    self.sample_overrides = dict(sample_overrides or {})
    tok, cfg = world_model.tokenizer, world_model.cfg
    charset = tokenizer_charset(tok)
    self._charset = frozenset(charset)
    max_tokens = max(cfg.data.max_target_len - 1, cfg.data.max_context_len)
    self.observation_space = spaces.Text(max_length=longest_piece(tok) * max_tokens,
                                         min_length=0, charset=charset)
    self.action_space = spaces.Text(max_length=max_action_length, min_length=1, charset=charset)
    # The episode (spec, env name, steer, history, raw state, step, seeds) starts at reset.
    self._spec: Spec | None = None
    self._over = False

  def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
            ) -> tuple[str, dict[str, Any]]:
    super().reset(seed=seed)
    options = options or {}
    spec, env_name = self.specs.draw(self.np_random)
    self._episode_seed = int(self.np_random.integers(2**32))
    if "spec" in options:
      spec, env_name = options["spec"], options.get("env", "")
    limit = self.observation_space.max_length
    if len(spec.initial_state) > limit:
      raise ValueError(f"the initial state has {len(spec.initial_state)} characters; the "
                       f"observation space holds {limit} (the model reads at most "
                       f"{self.world_model.cfg.data.max_context_len} context tokens)")
    self._spec, self._env_name = spec, env_name
    self._is_done = self.done or default_success_fn(env_name)
    self._steer = options.get("steer", self.steer)
    self._history: list[tuple[str, str]] = []
    self._state = spec.initial_state
    self._step = 0
    self._over = False
    return self._observe(self._state), self._info()

  def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
    request = self.request(action)
    (next_state,) = _predict(self.world_model, [request], self.sample_overrides)
    return self.advance(action, next_state, request.seed)

  # The two halves of `step`, shared with the vector environment so that a
  # batched step runs exactly the same logic around one sampler call.

  def request(self, action: str) -> _Request:
    """The transition this action asks the world model to predict."""
    if self._spec is None:
      raise RuntimeError("call reset() before step()")
    if self._over:
      raise RuntimeError("the episode has ended (terminated or truncated); call reset()")
    tr = Transition(self._spec, tuple(self._history), self._state, action)
    return _Request(tr, self._steer, step_seed(self._episode_seed, self._step),
                    format_check(self._env_name, self._spec))

  def advance(self, action: str, next_state: str, seed: int
              ) -> tuple[str, float, bool, bool, dict[str, Any]]:
    """Applies a predicted next state: history, reward, termination, truncation."""
    spec, state, history = self._spec, self._state, tuple(self._history)
    self._history.append((state, action))
    self._state = next_state
    self._step += 1
    terminated = bool(self._is_done(spec, next_state))
    reward = float(terminated if self.reward_fn is None
                   else self.reward_fn(spec, history, state, action, next_state))
    truncated = self._step >= self.max_steps
    self._over = terminated or truncated
    return (self._observe(next_state), reward, terminated, truncated,
            self._info(sample_seed=seed))

  def _observe(self, text: str) -> str:
    return "".join(c if c in self._charset else REPLACEMENT_CHAR for c in text)

  def _info(self, **extra) -> dict[str, Any]:
    return {"spec": self._spec, "env": self._env_name, "step": self._step,
            "episode_seed": self._episode_seed, **extra}


# ------------------------------------------------------------------ the vector environment


class WorldModelVectorEnv(VectorEnv):
  """`num_envs` WorldModelEnvs stepped with ONE sampler call per step.

  Gymnasium's VectorEnv API: observations are a tuple of strings (Text
  batches as a `Tuple` space), rewards / terminations / truncations are
  arrays, infos a dict of arrays with `_key` masks. Autoreset is next-step
  (a sub-environment that ended is reset by the following `step`, which
  ignores its action and returns reward 0). `reset(seed=s)` seeds sub-env i
  with s + i, so sub-env i matches `WorldModelEnv(...).reset(seed=s + i)`
  stepped with the same actions. Every constructor argument but `num_envs`
  is WorldModelEnv's; a JSONL spec source is read once and shared.
  """

  metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}

  def __init__(self, world_model: WorldModel, spec_source: SpecSource,
               reward_fn: RewardFn | None = None, max_steps: int = 20, *, num_envs: int,
               **env_kwargs):
    if num_envs < 1:
      raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    specs = SpecPool.of(spec_source)
    self.envs = [WorldModelEnv(world_model, specs, reward_fn, max_steps, **env_kwargs)
                 for _ in range(num_envs)]
    self.world_model = world_model
    self.num_envs = num_envs
    self.single_observation_space = self.envs[0].observation_space
    self.single_action_space = self.envs[0].action_space
    self.observation_space = batch_space(self.single_observation_space, num_envs)
    self.action_space = batch_space(self.single_action_space, num_envs)
    self._autoreset_N = np.zeros(num_envs, bool)

  def reset(self, *, seed: int | Sequence[int | None] | None = None,
            options: dict[str, Any] | None = None) -> tuple[tuple[str, ...], dict[str, Any]]:
    if seed is None or isinstance(seed, int):
      seeds = [None if seed is None else seed + i for i in range(self.num_envs)]
    else:
      seeds = list(seed)
    if len(seeds) != self.num_envs:
      raise ValueError(f"got {len(seeds)} seeds for {self.num_envs} environments")
    obs, infos = [], {}
    for i, (env, s) in enumerate(zip(self.envs, seeds)):
      o, info = env.reset(seed=s, options=options)
      obs.append(o)
      infos = self._add_info(infos, info, i)
    self._autoreset_N[:] = False
    return tuple(obs), infos

  def step(self, actions: Sequence[str]):
    actions = tuple(actions)
    if len(actions) != self.num_envs:
      raise ValueError(f"got {len(actions)} actions for {self.num_envs} environments")
    requests = {i: self.envs[i].request(actions[i]) for i in range(self.num_envs)
                if not self._autoreset_N[i]}
    texts = _predict(self.world_model, list(requests.values()),
                     self.envs[0].sample_overrides) if requests else []
    predicted = dict(zip(requests, texts))
    obs, infos = [], {}
    rewards = np.zeros(self.num_envs, np.float64)
    terminated = np.zeros(self.num_envs, bool)
    truncated = np.zeros(self.num_envs, bool)
    for i, env in enumerate(self.envs):
      if i in predicted:
        o, rewards[i], terminated[i], truncated[i], info = env.advance(
            actions[i], predicted[i], requests[i].seed)
      else:
        o, info = env.reset()
      obs.append(o)
      infos = self._add_info(infos, info, i)
    self._autoreset_N = terminated | truncated
    return tuple(obs), rewards, terminated, truncated, infos
