"""Rewards for predicted next states, and fault-tolerant batched scoring.

A reward is a plain Python callable `(spec, step, prediction) -> float`,
where `step` is the reference transition and `prediction` the predicted next
state. Rewards run on the host between jitted calls; `score_batch` isolates
them so that one failing callback costs one reward, not the training run.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import json
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from absl import logging

from mdlm_wm import config as config_lib
from mdlm_wm.checks.result import CheckResult, parse_status_line
from mdlm_wm.data.schema import Spec, Step
from mdlm_wm.envs.score import check_prediction
from mdlm_wm.eval import metrics

Reward = Callable[[Spec, Step, str], float]

# Failures logged per score_batch call; the rest are only counted.
MAX_LOGGED_FAILURES = 10

# Check results kept for the completions scored last (see _CheckMemo).
CHECK_MEMO_SIZE = 4096


class _CheckMemo:
  """The check result of recent (env, spec, step, prediction)s.

  A GRPO step scores every completion twice: once for its reward
  (`make_reward`) and once for the step's pass rate (`state_check` again);
  the memo makes the second call free, so each completion's environment
  check runs once. Keys are the spec and step objects' identities (they are
  not hashable), which stay valid because each entry holds both objects.
  """

  def __init__(self, size: int):
    self.size = size
    self.entries: collections.OrderedDict = collections.OrderedDict()
    self.lock = threading.Lock()

  def result(self, env: str, spec: Spec, step: Step, prediction: str) -> CheckResult:
    key = (env, id(spec), id(step), prediction)
    with self.lock:
      hit = self.entries.get(key)
      if hit is not None:
        self.entries.move_to_end(key)
        return hit[2]
    result = check_prediction(env, spec, step, prediction)
    with self.lock:
      self.entries[key] = (spec, step, result)
      while len(self.entries) > self.size:
        self.entries.popitem(last=False)
    return result


_MEMO = _CheckMemo(CHECK_MEMO_SIZE)


def state_check(env: str) -> Reward:
  """The state-check score in [0, 1]: the fraction of determined facts and
  constraints on revealed content that hold, over the generic checks and the
  environment's own check together (`envs.score.check_prediction`; its
  `passed` is evaluation's `pass`). Revealed facts (hidden draws no model can
  know) do not count. 1.0 exactly when the prediction passes."""

  def reward(spec: Spec, step: Step, prediction: str) -> float:
    return _MEMO.result(env, spec, step, prediction).score

  return reward


def passed(env: str) -> Reward:
  """Evaluation's `pass` as a reward: 1.0 when every determined fact and
  every constraint on revealed content holds, else 0.0 (`state_check` == 1)."""

  def reward(spec: Spec, step: Step, prediction: str) -> float:
    return float(_MEMO.result(env, spec, step, prediction).passed)

  return reward


def _json_values(text: str, limit: float = math.inf) -> int:
  """Number of JSON objects/arrays in `text` (nested ones not counted
  separately), stopping at `limit`."""
  decoder = json.JSONDecoder()
  count, i = 0, 0
  while count < limit:
    starts = [j for j in (text.find("{", i), text.find("[", i)) if j >= 0]
    if not starts:
      break
    start = min(starts)
    try:
      _, i = decoder.raw_decode(text, start)
      count += 1
    except (ValueError, RecursionError):  # RecursionError: very deep "[[[[...".
      i = start + 1
  return count


def _status_keys(text: str) -> tuple[str, ...] | None:
  """Keys of a trailing `[key: value | ...]` status line, in order, or None if
  the text does not end with one (the one status-line parser's reading)."""
  facts = parse_status_line(text)
  return None if facts is None else tuple(facts)


def format_validity(env: str) -> Reward:
  """1.0 when the prediction has the reference next state's shape, else 0.0.

  Well formed means: not blank; at least as many parseable JSON objects or
  arrays as the reference holds (tool-call envs answer in JSON, so truncated
  or broken JSON fails); and, if the reference ends with a `[key: value |
  ...]` status line, a trailing status line with the same keys in the same
  order (the envs render them in a fixed order). The shape is read off the
  reference, so one definition serves every environment; `env` is accepted
  only for a signature uniform with the other env-dependent rewards.
  """
  del env

  def reward(spec: Spec, step: Step, prediction: str) -> float:
    del spec
    if not prediction.strip():
      return 0.0
    reference = step.next_state
    needed = _json_values(reference)
    if _json_values(prediction, limit=needed) < needed:
      return 0.0
    keys = _status_keys(reference)
    return float(keys is None or _status_keys(prediction) == keys)

  return reward


def bleu1_to_reference() -> Reward:
  """Sentence BLEU-1 of the prediction against the reference next state."""
  return lambda spec, step, prediction: metrics.bleu1(prediction, step.next_state)


def rouge_l_to_reference() -> Reward:
  """ROUGE-L F-measure of the prediction against the reference next state."""
  return lambda spec, step, prediction: metrics.rouge_l(prediction, step.next_state)


def length_penalty(max_ratio: float = 1.5) -> Reward:
  """0 up to `max_ratio` x the reference length (characters); beyond it,
  minus the excess as a fraction of that allowed length, capped at -1."""
  if max_ratio <= 0:
    raise ValueError(f"max_ratio must be positive, got {max_ratio}")

  def reward(spec: Spec, step: Step, prediction: str) -> float:
    del spec
    allowed = max_ratio * len(step.next_state)
    if len(prediction) <= allowed:
      return 0.0
    return -min(1.0, (len(prediction) - allowed) / allowed) if allowed else -1.0

  return reward


def make_reward(weights: Mapping[str, float], env: str) -> Reward:
  """The weighted sum of the rewards in config_lib.REWARD_KEYS with a nonzero weight."""
  factories = {
      "state_check": lambda: state_check(env),
      "passed": lambda: passed(env),
      "format": lambda: format_validity(env),
      "bleu1": bleu1_to_reference,
      "rouge_l": rouge_l_to_reference,
      "length": length_penalty,
  }
  unknown = sorted(set(weights) - set(config_lib.REWARD_KEYS))
  if unknown:
    raise ValueError(f"unknown rewards {unknown}; expected names from {config_lib.REWARD_KEYS}")
  terms = [(w, factories[name]()) for name, w in weights.items() if w != 0]
  if not terms:
    raise ValueError(f"every reward weight is zero: {dict(weights)}")

  def reward(spec: Spec, step: Step, prediction: str) -> float:
    return sum(w * fn(spec, step, prediction) for w, fn in terms)

  return reward


@dataclasses.dataclass
class ScoringResult:
  """rewards: float32 [len(items)] in input order; failures: (item id,
  "ExceptionType: message" or "non-finite reward nan"); seconds: wall time."""
  rewards: np.ndarray
  failures: list[tuple[str, str]]
  seconds: float


def score_batch(reward_fns_by_item: Sequence[Reward],
                items: Sequence[tuple[str, Spec, Step, str]], *,
                on_error: float = 0.0, num_threads: int = 0) -> ScoringResult:
  """Calls `reward_fns_by_item[i]` on the (spec, step, prediction) of item i.

  items are (item_id, spec, step, prediction). Policy for a callback that
  raises or returns NaN/inf: its reward is `on_error` (0 by default: a
  broken score gives no credit, and a finite value keeps the group's
  advantages defined); the failure is recorded and logged (the first
  MAX_LOGGED_FAILURES per call), never raised. `num_threads > 0` scores in a
  thread pool (for rewards that wait on I/O or release the GIL); the rewards
  keep the input order either way.
  """
  if len(reward_fns_by_item) != len(items):
    raise ValueError(f"{len(reward_fns_by_item)} reward callables for {len(items)} items")
  start = time.perf_counter()

  def score(i: int) -> tuple[float | None, str]:
    _, spec, step, prediction = items[i]
    try:
      value = float(reward_fns_by_item[i](spec, step, prediction))
    except Exception as e:  # noqa: BLE001 -- a broken callback must score, never raise
      return None, f"{type(e).__name__}: {e}"
    if not math.isfinite(value):
      return None, f"non-finite reward {value}"
    return value, ""

  if num_threads > 0:
    with concurrent.futures.ThreadPoolExecutor(num_threads) as pool:
      outcomes = list(pool.map(score, range(len(items))))
  else:
    outcomes = [score(i) for i in range(len(items))]

  rewards = np.array([on_error if v is None else v for v, _ in outcomes], np.float32)
  failures = [(item[0], err) for item, (v, err) in zip(items, outcomes) if v is None]
  for item_id, err in failures[:MAX_LOGGED_FAILURES]:
    logging.warning("reward for item %s failed: %s", item_id, err)
  if len(failures) > MAX_LOGGED_FAILURES:
    logging.warning("%d more reward failures not logged (%d of %d items failed)",
                    len(failures) - MAX_LOGGED_FAILURES, len(failures), len(items))
  return ScoringResult(rewards, failures, time.perf_counter() - start)
