"""Percentile-bootstrap confidence intervals for per-example metric values.

Resampling uses `numpy.random.Generator(PCG64(seed))`, so an interval is a
pure function of its inputs. The point estimate is always the plain mean of
the values; the interval is the (alpha/2, 1 - alpha/2) percentiles of the
resampled means (numpy's default linear interpolation). Samples of the same
prompt are correlated, so `grouped_bootstrap_ci` resamples whole groups;
runs pooled over seeds are resampled within each run by
`stratified_bootstrap_ci`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence

import numpy as np

NAN3 = (math.nan, math.nan, math.nan)


def _percentiles(means: np.ndarray, confidence: float) -> tuple[float, float]:
  if not 0 < confidence < 1:
    raise ValueError(f"confidence must be in (0, 1), got {confidence}")
  alpha = (1 - confidence) / 2
  low, high = np.quantile(means, [alpha, 1 - alpha])
  return float(low), float(high)


def _interval(x: np.ndarray, means: np.ndarray,
              confidence: float) -> tuple[float, float, float]:
  """(mean, low, high), the interval widened to hold the mean if a skewed
  resample distribution leaves it outside (low <= mean <= high always)."""
  low, high = _percentiles(means, confidence)
  mean = float(x.mean())
  return mean, min(low, mean), max(high, mean)


def _labelled(values: Sequence[float], labels: Sequence[Hashable],
              what: str) -> tuple[np.ndarray, np.ndarray]:
  """The values as floats and each one's label as an index 0.. in order of
  first appearance (labels compare as given: 1 and "1" differ)."""
  x = np.asarray(values, dtype=np.float64)
  if len(labels) != x.size:
    raise ValueError(f"{x.size} values for {len(labels)} {what} labels")
  ids: dict[Hashable, int] = {}
  return x, np.array([ids.setdefault(g, len(ids)) for g in labels], dtype=np.int64)


def bootstrap_ci(values: Sequence[float], *, num_resamples: int = 1000,
                 confidence: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
  """(mean, low, high) of `values` by the percentile bootstrap over examples.
  Empty input gives (nan, nan, nan); a constant input its value three times.
  The interval always holds the mean (`_interval`)."""
  x = np.asarray(values, dtype=np.float64)
  if x.size == 0:
    return NAN3
  rng = np.random.Generator(np.random.PCG64(seed))
  means = x[rng.integers(0, x.size, size=(num_resamples, x.size))].mean(axis=1)
  return _interval(x, means, confidence)


def grouped_bootstrap_ci(values: Sequence[float], groups: Sequence[Hashable], *,
                         num_resamples: int = 1000, confidence: float = 0.95,
                         seed: int = 0) -> tuple[float, float, float]:
  """(mean, low, high) resampling whole groups (e.g. the G samples of one
  prompt) with replacement; each resample's statistic is the mean over all
  values of the drawn groups, so groups weigh by their size as in the plain
  mean. With one value per group it equals `bootstrap_ci`'s resampling."""
  x, index = _labelled(values, groups, "group")
  if x.size == 0:
    return NAN3
  sums = np.bincount(index, weights=x)
  counts = np.bincount(index).astype(np.float64)
  rng = np.random.Generator(np.random.PCG64(seed))
  draw = rng.integers(0, sums.size, size=(num_resamples, sums.size))
  means = sums[draw].sum(axis=1) / counts[draw].sum(axis=1)
  return _interval(x, means, confidence)


def stratified_bootstrap_ci(values: Sequence[float], strata: Sequence[Hashable], *,
                            num_resamples: int = 1000, confidence: float = 0.95,
                            seed: int = 0) -> tuple[float, float, float]:
  """(mean, low, high) resampling values with replacement within each stratum
  (e.g. the transitions of one seed's run), each stratum keeping its size, so
  the variation between strata (seeds) is fixed, not resampled. With one
  stratum it equals `bootstrap_ci`."""
  x, index = _labelled(values, strata, "stratum")
  if x.size == 0:
    return NAN3
  rng = np.random.Generator(np.random.PCG64(seed))
  sums = np.zeros(num_resamples)
  for k in range(index.max() + 1):
    members = x[index == k]
    sums += members[rng.integers(0, members.size, size=(num_resamples, members.size))].sum(1)
  return _interval(x, sums / x.size, confidence)


def summarize(rows: Sequence[Mapping[str, float]], keys: Sequence[str], *,
              group_key: str | None = None, num_resamples: int = 1000,
              confidence: float = 0.95, seed: int = 0) -> dict[str, dict[str, float]]:
  """Per key: {"mean", "low", "high", "n"} over the rows that hold a non-nan
  value for it (n counts them). With `group_key`, rows sharing
  `row[group_key]` (e.g. a prompt id) are resampled together."""
  out = {}
  for key in keys:
    kept = [r for r in rows if key in r and not math.isnan(r[key])]
    values = [float(r[key]) for r in kept]
    if group_key is None:
      mean, low, high = bootstrap_ci(values, num_resamples=num_resamples,
                                     confidence=confidence, seed=seed)
    else:
      mean, low, high = grouped_bootstrap_ci(values, [r[group_key] for r in kept],
                                             num_resamples=num_resamples,
                                             confidence=confidence, seed=seed)
    out[key] = {"mean": mean, "low": low, "high": high, "n": len(values)}
  return out
