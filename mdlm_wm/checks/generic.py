"""The generic state checker: scores a predicted next state against its step's `checks`.

A field `key: value` is "stated" when the key is followed, after at most a few
separator characters (quotes, colon, equals, spaces), by the value as a whole
token, case-insensitively. This matches `location: kitchen`,
`"status": 404`, `count=3` and `state: hot.` (a sentence-ending period), so
every environment renders its facts in one of those forms. "Whole token":
the value may not run on into a word character, a `/` or a `.` followed by
either, so `3` does not match `3.5`, `/home` does not match `/home/user` and
`1` does not match `1/3`.

Values are matched as text: a value containing `"` will not match inside JSON,
which escapes it; and `must_include` / `must_exclude` are case-insensitive
substring tests (as docs/schema.md defines them), so short names can hide inside
longer words ("pen" in "open").
"""

from __future__ import annotations

import re

from mdlm_wm.checks.result import CheckResult
from mdlm_wm.data.schema import Checks

_SEP = r"[\s\"':=]{1,4}"


def field_statements(text: str, key: str, value: str) -> list[int]:
  """Start offsets of every statement of `key` with `value` in `text`."""
  pattern = (r"(?<![\w])" + re.escape(key) + _SEP + r"\"?" + re.escape(str(value))
             + r"(?![\w/]|\.[\w/])")
  return [m.start() for m in re.finditer(pattern, text, flags=re.IGNORECASE)]


def states_field(text: str, key: str, value: str) -> bool:
  """True if `text` states `key` with `value` (see module docstring)."""
  return bool(field_statements(text, key, value))


def check_results(checks: Checks, prediction: str) -> dict[str, bool]:
  """One boolean per check: `include:X`, `exclude:X`, `field:K`."""
  out: dict[str, bool] = {}
  low = prediction.lower()
  for s in checks.must_include:
    out[f"include:{s}"] = s.lower() in low
  for s in checks.must_exclude:
    out[f"exclude:{s}"] = s.lower() not in low
  for k, v in checks.fields.items():
    out[f"field:{k}"] = states_field(prediction, k, v)
  return out


def check_score(checks: Checks, prediction: str) -> float:
  """Fraction of checks that hold; 1.0 when there are none."""
  results = check_results(checks, prediction)
  if not results:
    return 1.0
  return sum(results.values()) / len(results)


def generic_result(checks: Checks, prediction: str) -> CheckResult:
  """`check_results` split by `checks.revealed`: revealed fields and includes
  are reported as revealed facts, everything else is determined."""
  determined, revealed = {}, {}
  for name, ok in check_results(checks, prediction).items():
    kind, _, item = name.partition(":")
    is_revealed = (checks.is_revealed_include(item) if kind == "include"
                   else kind == "field" and checks.is_revealed_field(item))
    (revealed if is_revealed else determined)[name] = ok
  return CheckResult(determined, revealed, {})
