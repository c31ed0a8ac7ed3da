"""Bootstrap intervals: edge cases, coverage of the mean, width, grouping."""

import math

import numpy as np
import pytest

from mdlm_wm.eval import stats


def _width(ci):
  return ci[2] - ci[1]


def test_empty_and_constant_inputs():
  assert all(math.isnan(v) for v in stats.bootstrap_ci([]))
  assert all(math.isnan(v) for v in stats.grouped_bootstrap_ci([], []))
  assert stats.bootstrap_ci([0.25] * 9) == (0.25, 0.25, 0.25)
  assert stats.bootstrap_ci([1.0]) == (1.0, 1.0, 1.0)


def test_interval_contains_mean_matches_normal_approximation_and_narrows():
  small = stats.bootstrap_ci([0.0, 1.0] * 10)
  assert small[0] == 0.5
  # Normal approximation: 0.5 +- 1.96 * sqrt(0.25 / 20) = 0.5 +- 0.22.
  assert 0.22 <= small[1] <= 0.33 and 0.67 <= small[2] <= 0.78
  large = stats.bootstrap_ci([0.0, 1.0] * 500)
  assert large[1] <= 0.5 <= large[2]
  assert _width(large) < _width(small) / 5
  assert _width(stats.bootstrap_ci([0.0, 1.0] * 10, confidence=0.5)) < _width(small)
  with pytest.raises(ValueError):
    stats.bootstrap_ci([0.0, 1.0], confidence=1.0)


def test_deterministic_given_seed():
  values = np.random.default_rng(3).random(50)
  assert stats.bootstrap_ci(values, seed=1) == stats.bootstrap_ci(values, seed=1)
  assert stats.bootstrap_ci(values, seed=1) != stats.bootstrap_ci(values, seed=2)


def test_grouped_bootstrap_accounts_for_correlated_samples():
  # Ten prompts, eight samples each, samples of a prompt all agree.
  values = [float(p % 2) for p in range(10) for _ in range(8)]
  groups = [f"prompt-{p}" for p in range(10) for _ in range(8)]
  grouped = stats.grouped_bootstrap_ci(values, groups)
  assert grouped[0] == 0.5
  assert _width(grouped) > 2 * _width(stats.bootstrap_ci(values))
  # One value per group: the same resampling as the plain bootstrap.
  single = stats.grouped_bootstrap_ci(values, list(range(len(values))))
  assert single == pytest.approx(stats.bootstrap_ci(values))
  # Group labels are compared as given: 1 and "1" are different prompts.
  assert stats.grouped_bootstrap_ci([0.0, 1.0], [1, "1"]) == pytest.approx(
      stats.bootstrap_ci([0.0, 1.0]))
  with pytest.raises(ValueError):
    stats.grouped_bootstrap_ci([1.0, 0.0], ["a"])


def test_stratified_bootstrap_keeps_strata_apart():
  # Two runs of 20: one scores 0 everywhere, the other 1. Resampled within each
  # run the pooled mean cannot move; resampled over all 40 it can.
  values = [0.0] * 20 + [1.0] * 20
  runs = ["seed0"] * 20 + ["seed1"] * 20
  assert stats.stratified_bootstrap_ci(values, runs) == (0.5, 0.5, 0.5)
  assert _width(stats.bootstrap_ci(values)) > 0.2
  # One stratum: the plain bootstrap's resampling.
  mixed = list(np.random.default_rng(5).random(30))
  assert stats.stratified_bootstrap_ci(mixed, [0] * 30) == pytest.approx(
      stats.bootstrap_ci(mixed))
  # Strata weigh by their size, as in the pooled mean: a (4 values, mean
  # 0.25) varies, b (2 values, all 1) cannot, so a resample's mean is
  # (k + 2) / 6 for k ones drawn in a ~ Binomial(4, 0.25): its 2.5% and 97.5%
  # points are k = 0 and k = 3. Weighing the strata equally would give
  # (k / 4 + 1) / 2 instead: 0.5 and 0.875.
  ci = stats.stratified_bootstrap_ci([1.0, 0.0, 0.0, 0.0, 1.0, 1.0], ["a"] * 4 + ["b"] * 2)
  assert ci == pytest.approx((0.5, 2 / 6, 5 / 6))
  assert all(math.isnan(v) for v in stats.stratified_bootstrap_ci([], []))
  with pytest.raises(ValueError):
    stats.stratified_bootstrap_ci([1.0, 0.0], ["a"])


def test_summarize_ignores_nan_per_key_and_groups():
  rows = [{"pass": 1.0, "trailing": math.nan, "prompt": "a"},
          {"pass": 0.0, "trailing": 1.0, "prompt": "a"},
          {"pass": 1.0, "trailing": 1.0, "prompt": "b"},
          {"pass": 1.0, "prompt": "b"}]
  out = stats.summarize(rows, ["pass", "trailing", "missing"])
  assert out["pass"]["mean"] == 0.75 and out["pass"]["n"] == 4
  assert out["pass"]["low"] <= 0.75 <= out["pass"]["high"]
  assert out["trailing"] == {"mean": 1.0, "low": 1.0, "high": 1.0, "n": 2}
  assert out["missing"]["n"] == 0 and math.isnan(out["missing"]["mean"])
  grouped = stats.summarize(rows, ["pass"], group_key="prompt")
  assert grouped["pass"]["mean"] == 0.75 and grouped["pass"]["n"] == 4
  # Two groups with means 0.5 and 1.0: resampled means lie in [0.5, 1.0].
  assert grouped["pass"]["low"] == 0.5 and grouped["pass"]["high"] == 1.0
