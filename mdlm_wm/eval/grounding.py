"""State-check metrics: checks, env callbacks, trailing anchors, steering, rollouts.

Trailing anchors. Every built-in environment ends its next state with facts
that depend on the whole hidden state (a status line, JSON summary keys); an
autoregressive model must commit to them last, a diffusion model can plan
them. A field of `step.checks.fields` is TRAILING when its last `key: value`
statement in the reference next state starts inside the trailing region,
which is, on the reference with trailing whitespace stripped, the first rule
that applies of:
  1. the final line, when the text has more than one line
     (lab, files with output, calendar's `[total_events | unread | sent]`);
  2. the final bracketed group `[...]`, when the text ends with `]`
     (household's status, files' one-line status after a silent command);
  3. the last 25% of the characters (shop's one-line JSON, which ends with
     `"cart_count": n, "cart_total": t, "open_orders": k}`).
A field is "stated" exactly as `mdlm_wm.checks.generic.states_field` decides
(both use `field_statements`, which also gives the positions).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from mdlm_wm.checks.generic import field_statements, states_field
from mdlm_wm.data.schema import Spec, Step
from mdlm_wm.envs.score import score_prediction

TAIL_FRACTION = 0.25


def trailing_start(reference: str) -> int:
  """Offset where the trailing region of `reference` begins (module docstring)."""
  text = reference.rstrip()
  if "\n" in text:
    return text.rfind("\n") + 1
  if text.endswith("]") and "[" in text:
    return text.rfind("[")
  return math.floor(len(text) * (1 - TAIL_FRACTION))


def trailing_fields(step: Step, reference: str | None = None) -> list[str]:
  """Keys of `step.checks.fields` whose last statement in `reference` (by
  default `step.next_state`) starts in its trailing region, in field order.
  A field the reference never states is not trailing."""
  text = step.next_state if reference is None else reference
  start = trailing_start(text)
  return [k for k, v in step.checks.fields.items()
          if any(pos >= start for pos in field_statements(text, k, v))]


def grounding_scores(env: str, spec: Spec, step: Step, prediction: str) -> dict[str, float]:
  """`score_prediction`'s `checks`, `env` (when registered), `pass` and
  `exact`, plus `trailing`: the fraction of the step's trailing fields that
  the prediction states with the reference value (anywhere in it, as the
  generic checker does), and `trailing_pass`: 1.0 when all of them are. Both
  are nan when the step has no trailing field, so means skip such steps."""
  out = score_prediction(env, spec, step, prediction)
  keys = trailing_fields(step)
  if not keys:
    return {**out, "trailing": math.nan, "trailing_pass": math.nan}
  stated = [states_field(prediction, k, step.checks.fields[k]) for k in keys]
  return {**out, "trailing": sum(stated) / len(stated), "trailing_pass": float(all(stated))}


def steer_effect(with_steer_scores: Sequence[Mapping[str, float]],
                 without_steer_scores: Sequence[Mapping[str, float]], *,
                 key: str = "pass") -> dict[str, float]:
  """How much conditioning on the steer z helps, on steps where it is active.

  The i-th entries of both lists score predictions for the same prompt, with
  and without z (the caller samples both). Returns the mean `key` with z
  (`with`), without it (`without`), their difference (`delta` = with -
  without, positive when z helps) and the number of pairs `n`; nan means when
  there are no pairs.
  """
  if len(with_steer_scores) != len(without_steer_scores):
    raise ValueError(f"unpaired scores: {len(with_steer_scores)} with the steer, "
                     f"{len(without_steer_scores)} without")
  if not with_steer_scores:
    return {"with": math.nan, "without": math.nan, "delta": math.nan, "n": 0}
  with_z = float(np.mean([s[key] for s in with_steer_scores]))
  without_z = float(np.mean([s[key] for s in without_steer_scores]))
  return {"with": with_z, "without": without_z, "delta": with_z - without_z,
          "n": len(with_steer_scores)}


def pass_rate_by_horizon(rows: Iterable[tuple[int, float]]) -> dict[int, float]:
  """Mean pass per rollout horizon k from (k, pass) pairs, keys sorted; only
  horizons present in `rows` appear."""
  by_k: dict[int, list[float]] = defaultdict(list)
  for k, passed in rows:
    by_k[int(k)].append(float(passed))
  return {k: float(np.mean(by_k[k])) for k in sorted(by_k)}
