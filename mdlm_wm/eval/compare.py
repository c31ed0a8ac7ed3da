"""Paired before/after comparison of two sets of predictions for the same transitions.

Two independent 95% intervals (one per model) can overlap while the change
itself is clearly non-zero, because most of their width is the spread
between transitions, which both models share. Scoring both on the same
transitions and bootstrapping the per-transition differences removes that
shared part: the interval is on the change itself.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mdlm_wm.eval import stats
from mdlm_wm.eval.evaluate import Example, score_example

# self_bleu needs two or more samples of a transition; with one it is left out
# of the comparison (distinct_2 is defined for one sample too).
KEYS = ("pass", "pass_all", "determined_acc", "revealed_valid", "env", "checks", "trailing_pass",
        "bleu1", "self_bleu", "distinct_2")


def paired_comparison(examples: Sequence[Example], before: Sequence[Sequence[str]],
                      after: Sequence[Sequence[str]], keys: Sequence[str] = KEYS,
                      seed: int = 0) -> dict[str, dict[str, float]]:
  """Per metric: the means before and after and the mean per-transition change
  (`diff`) with its 95% bootstrap interval (`low`, `high`) over the `n`
  transitions where both have the metric (an environment without a callback
  has no `env`)."""
  if not len(examples) == len(before) == len(after):
    raise ValueError(f"{len(examples)} examples, {len(before)} before and {len(after)} after")
  rows_before = [score_example(ex, s) for ex, s in zip(examples, before)]
  rows_after = [score_example(ex, s) for ex, s in zip(examples, after)]
  out = {}
  for key in keys:
    pairs = np.array([(b[key], a[key]) for b, a in zip(rows_before, rows_after)
                      if not (math.isnan(b.get(key, math.nan))
                              or math.isnan(a.get(key, math.nan)))], dtype=np.float64)
    if not pairs.size:
      continue
    diff, low, high = stats.bootstrap_ci(pairs[:, 1] - pairs[:, 0], seed=seed)
    out[key] = {"before": float(pairs[:, 0].mean()), "after": float(pairs[:, 1].mean()),
                "diff": diff, "low": low, "high": high, "n": len(pairs)}
  return out


def markdown_table(result: dict[str, dict[str, float]]) -> str:
  lines = ["| metric | before | after | change [95% CI, paired] | transitions |",
           "|---|---|---|---|---|"]
  for key, r in result.items():
    lines.append(f"| {key} | {r['before']:.3f} | {r['after']:.3f} | "
                 f"{r['diff']:+.3f} [{r['low']:+.3f}, {r['high']:+.3f}] | {r['n']} |")
  return "\n".join(lines)
