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
from collections.abc import Callable

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


def fact_entries(checks: Checks, prediction: str,
                 field_ok: Callable[[str, str], bool] | None = None) -> CheckResult:
  """The entries every checker shares: one per field (`field_ok(key, value)`;
  None leaves the fields to the caller), per `must_include` item and per
  `must_exclude` item, each determined or revealed as `checks.revealed` says
  (an exclusion is always determined)."""
  determined, revealed = {}, {}
  if field_ok is not None:
    for key, value in checks.fields.items():
      side = revealed if checks.is_revealed_field(key) else determined
      side[f"field:{key}"] = bool(field_ok(key, value))
  low = prediction.lower()
  for item in checks.must_include:
    side = revealed if checks.is_revealed_include(item) else determined
    side[f"include:{item}"] = item.lower() in low
  for item in checks.must_exclude:
    determined[f"exclude:{item}"] = item.lower() not in low
  return CheckResult(determined, revealed, {})


def generic_result(checks: Checks, prediction: str) -> CheckResult:
  """The generic `checks` split by `checks.revealed`: fields stated as
  `states_field` reads them, includes and excludes as substrings."""
  return fact_entries(checks, prediction, lambda k, v: states_field(prediction, k, v))
