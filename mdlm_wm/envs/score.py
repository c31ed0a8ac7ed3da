"""Scores one predicted next state against a reference step: every check at once.

A prediction is graded on the union of two checkers' entries (checks/result.py):
the step's generic `checks` (docs/schema.md), split into determined and revealed facts by
`checks.revealed`, and the environment's own `Env.check` (determined facts,
revealed facts and constraints on revealed content) for a built-in or a real
(`family/task`) environment; a real family's checker lives with its adapter,
so scoring its transitions needs its engine installed (an ImportError names
the extra). The environment's entry wins where both name the same fact
(`field:location`), so a fact both checkers read counts once. Other
environment names (a user's own data) are graded on the generic checks.
It sits above the registry, which finds each environment's checker by name;
`checks/` below holds only what every environment shares.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from mdlm_wm.checks.generic import check_score, generic_result
from mdlm_wm.checks.result import FORMAT, CheckResult
from mdlm_wm.data.schema import Spec, Step
from mdlm_wm.envs import registry


def env_result(env: str, spec: Spec, step: Step, prediction: str) -> CheckResult | None:
  """The environment's own check (`Env.check`), None for names that are
  neither built-in nor real."""
  if not registry.is_known(env):
    return None
  return registry.check_fn(env)(spec, step, prediction)


def combined_result(generic: CheckResult, own: CheckResult | None) -> CheckResult:
  """The generic checks' entries overridden and extended by the environment's."""
  return generic if own is None else generic.merged(own)


def check_prediction(env: str, spec: Spec, step: Step, prediction: str) -> CheckResult:
  """Both checkers' result in one (the environment's check runs once): its
  `passed` is `pass`, its `score` GRPO's state-check reward."""
  return combined_result(generic_result(step.checks, prediction),
                         env_result(env, spec, step, prediction))


def score_prediction(env: str, spec: Spec, step: Step, prediction: str) -> dict[str, float]:
  """The metrics of one prediction, each in [0, 1]:

  `checks`: the fraction of the step's `checks` right (determined and
  revealed alike); `env`: the environment's own `check(...).score` (only for
  a built-in or real environment); `pass`: 1.0 when every determined fact is right
  and every constraint on revealed content holds (both checkers);
  `pass_all`: `pass` and every revealed fact equal to the reference's draw
  (the old every-fact pass); `determined_acc`: the fraction of determined
  facts right; `revealed_valid`: the fraction of constraints that hold;
  `well_formed`: 1.0 when the prediction parses as the environment's state
  (only for a built-in or real environment, as `env`);
  `exact`: 1.0 for an exact match with the reference.
  """
  own = env_result(env, spec, step, prediction)
  result = combined_result(generic_result(step.checks, prediction), own)
  out = {"checks": check_score(step.checks, prediction)}
  if own is not None:
    out["env"] = float(own.score)
    out["well_formed"] = float(own.determined.get(FORMAT) is not False)
  out.update({"pass": float(result.passed), "pass_all": float(result.passed_all),
              "determined_acc": float(result.determined_acc),
              "revealed_valid": float(result.revealed_valid)})
  # Trailing whitespace is not a difference (as in eval.metrics.exact_match).
  out["exact"] = float(prediction.rstrip() == step.next_state.rstrip())
  return out


# The step `well_formed` checks against: a checker's format reads only the prediction.
_NO_STEP = Step(state="", action="", next_state="")


def well_formed(env: str, spec: Spec, prediction: str) -> bool:
  """Whether `prediction` parses as a state of `env` (the checker's `format`
  fact); True for environments without a checker. It needs no reference
  step: every checker reads its format from the prediction alone."""
  own = env_result(env, spec, _NO_STEP, prediction)
  return own is None or own.determined.get(FORMAT) is not False


def format_check(env: str | None, spec: Spec) -> Callable[[str], bool] | None:
  """`well_formed` for one environment and spec, the check format retries
  take (WorldModel.redraw); None when the environment is not named."""
  return functools.partial(well_formed, env, spec) if env else None
