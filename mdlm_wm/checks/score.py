"""Scores one predicted next state against a reference step: every check at once."""

from __future__ import annotations

from mdlm_wm.checks.generic import check_score
from mdlm_wm.data.schema import Spec, Step
from mdlm_wm.envs import base


def score_prediction(env: str, spec: Spec, step: Step, prediction: str) -> dict[str, float]:
  """`checks` (generic SCHEMA checks), `env` (the environment's callback, when
  one is registered for `env`), `pass` (1.0 when every check scores 1.0) and
  `exact` (1.0 for an exact match with the reference)."""
  out = {"checks": check_score(step.checks, prediction)}
  if env in base.env_names():
    out["env"] = float(base.state_check_fn(env)(spec, step, prediction))
  out["pass"] = float(all(v == 1.0 for v in out.values()))
  # Trailing whitespace is not a difference (as in eval.metrics.exact_match).
  out["exact"] = float(prediction.rstrip() == step.next_state.rstrip())
  return out
