"""Request bodies -> typed requests, with every problem as `key.path: message`.

The spec goes through the same validation as trajectory files
(`mdlm_wm.data.schema`), so a bad spec reads the same here as in
`launch.check_data` (`spec.tools[0].name: missing`); the other fields use the
same typed getters. Limits are checked here too, before anything reaches the
model; their messages name the limit.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from typing import Any

from mdlm_wm.data import schema
from mdlm_wm.data.schema import Spec
from mdlm_wm.envs import registry
from mdlm_wm.serve.config import ServeConfig
from mdlm_wm.world_model import Anchors

# Seeds feed jax.random.key, which keeps 32 bits; 31 leave room for the
# per-step seeds that rollouts and sessions derive from them.
MAX_SEED = 2**31 - 1
# JSON nesting a request may use (the deepest legitimate part is a tool's
# parameter schema).
MAX_NESTING = 32

_SAMPLING_KEYS = ("temperature", "steps", "seed")
STEP_KEYS = frozenset({"spec", "history", "state", "action", "steer", "fixed", "env",
                       "num_samples", *_SAMPLING_KEYS})
ROLLOUT_KEYS = frozenset({"spec", "actions", "state", "steer", "env", "num_samples",
                          *_SAMPLING_KEYS})
SESSION_KEYS = frozenset({"spec", "state", "steer", "env", *_SAMPLING_KEYS})
SESSION_STEP_KEYS = frozenset({"action", "fixed"})
ANCHOR_KEYS = frozenset({"prefix", "suffix", "length", "spans"})


class RequestError(Exception):
  """A request the service refuses: an HTTP status and `path: message` lines."""

  def __init__(self, status: int, errors: list[str]):
    self.status, self.errors = status, errors
    super().__init__("; ".join(errors))


@dataclasses.dataclass(frozen=True)
class Sampling:
  """Sampler settings of a request; None: the model's configured default."""
  num_samples: int = 1
  temperature: float | None = None
  steps: int | None = None
  seed: int | None = None  # None: the server draws one


@dataclasses.dataclass(frozen=True)
class StepRequest:
  spec: Spec
  history: tuple[tuple[str, str], ...]
  state: str
  action: str
  steer: str | None  # None: spec.steer
  fixed: Anchors | None
  sampling: Sampling
  env: str | None = None  # its parser redraws states that do not parse (format retries)


@dataclasses.dataclass(frozen=True)
class RolloutRequest:
  spec: Spec
  actions: tuple[str, ...]
  state: str | None  # None: spec.initial_state
  steer: str | None
  sampling: Sampling
  env: str | None = None


@dataclasses.dataclass(frozen=True)
class SessionRequest:
  spec: Spec
  state: str | None
  steer: str | None
  sampling: Sampling  # num_samples is 1: a session follows one trajectory
  env: str | None = None


@dataclasses.dataclass(frozen=True)
class SessionStepRequest:
  action: str
  fixed: Anchors | None


# --------------------------------------------------------------------------
# The body.


def decode_body(raw: bytes) -> dict[str, Any]:
  """Raw bytes -> a JSON object (the size limit is enforced while reading)."""
  try:
    obj = json.loads(raw.decode("utf-8"))
  except UnicodeDecodeError as e:
    raise RequestError(422, [f"body: invalid UTF-8 at byte {e.start}"]) from None
  except json.JSONDecodeError as e:
    raise RequestError(422, [f"body: invalid JSON: {e.msg} at line {e.lineno} column {e.colno}"]
                       ) from None
  except RecursionError:
    raise RequestError(422, [f"body: nested deeper than the JSON decoder allows (this service "
                             f"takes up to {MAX_NESTING} levels)"]) from None
  if not isinstance(obj, dict):
    raise RequestError(422, [f"body: expected object, got {schema._json_type(obj)}"])
  return obj


def parse_step(obj: Mapping[str, Any], cfg: ServeConfig) -> StepRequest:
  problems = _start(obj, STEP_KEYS, cfg)
  spec = _spec(obj, problems)
  history = _history(obj, cfg, problems)
  state = schema._get(obj, "state", "", str, problems, type_name="string")
  action = schema._get(obj, "action", "", str, problems, type_name="string")
  steer = _optional_str(obj, "steer", problems)
  fixed = _anchors(obj, problems)
  sampling = _sampling(obj, cfg, problems, with_num_samples=True)
  env = _env(obj, problems)
  _finish(problems)
  return StepRequest(spec, history, state, action, steer, fixed, sampling, env)


def parse_rollout(obj: Mapping[str, Any], cfg: ServeConfig) -> RolloutRequest:
  problems = _start(obj, ROLLOUT_KEYS, cfg)
  spec = _spec(obj, problems)
  actions = _actions(obj, cfg, problems)
  state = _optional_str(obj, "state", problems)
  steer = _optional_str(obj, "steer", problems)
  sampling = _sampling(obj, cfg, problems, with_num_samples=True)
  env = _env(obj, problems)
  _finish(problems)
  return RolloutRequest(spec, actions, state, steer, sampling, env)


def parse_session(obj: Mapping[str, Any], cfg: ServeConfig) -> SessionRequest:
  problems = _start(obj, SESSION_KEYS, cfg)
  spec = _spec(obj, problems)
  state = _optional_str(obj, "state", problems)
  steer = _optional_str(obj, "steer", problems)
  sampling = _sampling(obj, cfg, problems, with_num_samples=False)
  env = _env(obj, problems)
  _finish(problems)
  return SessionRequest(spec, state, steer, sampling, env)


def parse_session_step(obj: Mapping[str, Any], cfg: ServeConfig) -> SessionStepRequest:
  problems = _start(obj, SESSION_STEP_KEYS, cfg)
  action = schema._get(obj, "action", "", str, problems, type_name="string")
  fixed = _anchors(obj, problems)
  _finish(problems)
  return SessionStepRequest(action, fixed)


# --------------------------------------------------------------------------
# Fields.


def _start(obj: Mapping[str, Any], allowed: frozenset[str], cfg: ServeConfig) -> schema._Problems:
  """Problems that need no field parsing: unknown keys (a typo such as
  `num_sample` would otherwise be silently ignored) and over-long text."""
  problems = schema._Problems()
  for key in sorted(set(obj) - allowed):
    problems.add(key, f"unknown key (expected one of: {', '.join(sorted(allowed))})")
  _check_text_lengths(obj, cfg.max_text_chars, problems)
  return problems


def _finish(problems: schema._Problems) -> None:
  if problems.items:
    raise RequestError(422, [f"{path}: {msg}" for path, msg in problems.items])


def _check_text_lengths(body: Mapping[str, Any], limit: int, problems: schema._Problems) -> None:
  """Every string in the body, however deep (tool parameter schemas are free
  JSON). Iterative, and nesting is capped: a deep body must not reach the
  recursion limit of any later step."""
  stack: list[tuple[str, Any, int]] = [(str(k), v, 1) for k, v in reversed(body.items())]
  while stack:
    path, value, depth = stack.pop()
    if isinstance(value, str):
      if len(value) > limit:
        problems.add(path, f"{len(value)} characters exceed the limit max_text_chars={limit}")
    elif isinstance(value, (dict, list)) and depth >= MAX_NESTING:
      problems.add(path, f"nested deeper than {MAX_NESTING} levels")
    elif isinstance(value, dict):
      stack += [(f"{path}.{k}", v, depth + 1) for k, v in reversed(value.items())]
    elif isinstance(value, list):
      stack += [(f"{path}[{i}]", v, depth + 1) for i, v in reversed(list(enumerate(value)))]


def _spec(obj: Mapping[str, Any], problems: schema._Problems) -> Spec:
  raw = schema._get(obj, "spec", "", dict, problems, type_name="object")
  return schema._parse_spec(raw, problems) if raw is not None else Spec("", "")


def _optional_str(obj: Mapping[str, Any], key: str, problems: schema._Problems) -> str | None:
  return schema._get(obj, key, "", str, problems, required=False, type_name="string")


def _env(obj: Mapping[str, Any], problems: schema._Problems) -> str | None:
  """An environment name the registry knows (built-in or `family/task`), or None."""
  env = _optional_str(obj, "env", problems)
  if env is not None and not registry.is_known(env):
    problems.add("env", f"unknown environment {env!r} (built-in: "
                        f"{', '.join(registry.env_names())}; real: family/task)")
    return None
  return env


def _history(obj: Mapping[str, Any], cfg: ServeConfig,
             problems: schema._Problems) -> tuple[tuple[str, str], ...]:
  raw = schema._get(obj, "history", "", list, problems, required=False, default=[],
                    type_name="list")
  if len(raw) > cfg.max_history:
    problems.add("history", f"{len(raw)} pairs exceed the limit max_history={cfg.max_history}")
    return ()
  pairs = []
  for i, pair in enumerate(raw):
    if (isinstance(pair, list) and len(pair) == 2
        and all(isinstance(x, str) for x in pair)):
      pairs.append((pair[0], pair[1]))
    else:
      problems.add(f"history[{i}]", "expected a [state, action] pair of strings, got "
                   f"{_describe(pair)}")
  return tuple(pairs)


def _actions(obj: Mapping[str, Any], cfg: ServeConfig,
             problems: schema._Problems) -> tuple[str, ...]:
  raw = schema._get(obj, "actions", "", list, problems, default=[], type_name="list")
  if obj.get("actions") == []:
    problems.add("actions", "empty (a rollout needs at least one action)")
  if len(raw) > cfg.max_actions:
    problems.add("actions", f"{len(raw)} actions exceed the limit max_actions={cfg.max_actions}")
    return ()
  for i, action in enumerate(raw):
    if not isinstance(action, str):
      problems.add(f"actions[{i}]", f"expected string, got {schema._json_type(action)}")
  return tuple(raw)


def _describe(value: Any) -> str:
  if isinstance(value, list):
    return f"a list of {len(value)} ({', '.join(schema._json_type(x) for x in value)})"
  return schema._json_type(value)


def _anchors(obj: Mapping[str, Any], problems: schema._Problems) -> Anchors | None:
  raw = schema._get(obj, "fixed", "", dict, problems, required=False, type_name="object")
  if raw is None:
    return None
  for key in sorted(set(raw) - ANCHOR_KEYS):
    problems.add(f"fixed.{key}", f"unknown key (expected one of: {', '.join(sorted(ANCHOR_KEYS))})")
  prefix = schema._get(raw, "prefix", "fixed", str, problems, False, "", "string")
  suffix = schema._get(raw, "suffix", "fixed", str, problems, False, "", "string")
  length = schema._get(raw, "length", "fixed", (int, type(None)), problems, False, None,
                       "integer or null")
  spans_raw = schema._get(raw, "spans", "fixed", list, problems, False, [], "list")
  spans = []
  for i, span in enumerate(spans_raw):
    if (isinstance(span, list) and len(span) == 2 and isinstance(span[0], int)
        and not isinstance(span[0], bool) and isinstance(span[1], str)):
      spans.append((span[0], span[1]))
    else:
      problems.add(f"fixed.spans[{i}]", f"expected an [offset, text] pair, got {_describe(span)}")
  return Anchors(prefix, suffix, length, tuple(spans))


def _sampling(obj: Mapping[str, Any], cfg: ServeConfig, problems: schema._Problems, *,
              with_num_samples: bool) -> Sampling:
  num_samples = 1
  if with_num_samples:
    num_samples = schema._get(obj, "num_samples", "", int, problems, False, 1, "integer")
    _bounded(problems, "num_samples", num_samples, 1, cfg.max_num_samples, "max_num_samples")
  temperature = schema._get(obj, "temperature", "", (int, float), problems, False, None, "number")
  if temperature is not None and not (math.isfinite(temperature) and temperature >= 0):
    problems.add("temperature", f"must be a finite number >= 0, got {temperature}")
  steps = schema._get(obj, "steps", "", int, problems, False, None, "integer")
  _bounded(problems, "steps", steps, 1, cfg.max_steps, "max_steps")
  seed = schema._get(obj, "seed", "", int, problems, False, None, "integer")
  _bounded(problems, "seed", seed, 0, MAX_SEED, None)
  return Sampling(num_samples, None if temperature is None else float(temperature), steps, seed)


def _bounded(problems: schema._Problems, key: str, value: int | None, low: int, high: int,
             limit_name: str | None) -> None:
  if value is None:
    return
  if value < low:
    problems.add(key, f"must be >= {low}, got {value}")
  elif value > high:
    problems.add(key, f"{value} exceeds the limit {limit_name}={high}" if limit_name
                 else f"must be <= {high}, got {value}")
