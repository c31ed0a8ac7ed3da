"""One checker result for every environment: determined facts, revealed facts
and constraints on revealed content, scored the same way everywhere.

A world model is graded only on what it can know:
  * `determined`: facts that follow from the spec, s_t and a_t (the room after
    `go to X`, the cart count after an add). Each must be right.
  * `revealed`: facts the simulator drew from hidden state at this step (a
    first look inside a container, a search's results). No model can know
    them; they are reported (`pass_all`) but never fail `pass`.
  * `constraints`: rules that invented (revealed) content must satisfy (a
    search lists products whose names match the query, `count` equals the
    items listed, a container holds objects of the world's kinds).
Each entry maps a readable name (`field:location`, `include:apple`,
`count_matches_items`) to whether the prediction satisfies it. Every
environment's checker states whether the prediction parses as its
determined fact `FORMAT`; `revealed_valid` reads it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

FORMAT = "format"  # the determined fact: the prediction parses as this environment's state


@dataclasses.dataclass(frozen=True)
class CheckResult:
  determined: Mapping[str, bool] = dataclasses.field(default_factory=dict)
  revealed: Mapping[str, bool] = dataclasses.field(default_factory=dict)
  constraints: Mapping[str, bool] = dataclasses.field(default_factory=dict)

  @property
  def determined_acc(self) -> float:
    """Fraction of determined facts right (1.0 when there are none)."""
    return _mean(self.determined)

  @property
  def revealed_valid(self) -> float:
    """Fraction of constraints on revealed content satisfied (1.0 when none);
    0.0 for a state that does not parse (its `format` fact fails): none of
    its invented content can be read, so none of it is valid. Without this,
    unparseable text scored a perfect 1.0, above any real state."""
    if self.determined.get(FORMAT) is False:
      return 0.0
    return _mean(self.constraints)

  @property
  def revealed_match(self) -> float:
    """Fraction of revealed facts equal to the reference's draw (1.0 when none)."""
    return _mean(self.revealed)

  @property
  def passed(self) -> bool:
    """Every determined fact right and every constraint satisfied."""
    return all(self.determined.values()) and all(self.constraints.values())

  @property
  def passed_all(self) -> bool:
    """`passed` and every revealed fact equal to the reference's (the old pass)."""
    return self.passed and all(self.revealed.values())

  @property
  def score(self) -> float:
    """Fraction of determined facts and constraints that hold (1.0 when none):
    the environment's check score and GRPO's state-check reward."""
    items = [*self.determined.values(), *self.constraints.values()]
    return sum(items) / len(items) if items else 1.0

  def failures(self) -> list[str]:
    """Names of the failed determined facts and constraints (`kind:name`)."""
    return ([f"determined:{k}" for k, ok in self.determined.items() if not ok]
            + [f"constraint:{k}" for k, ok in self.constraints.items() if not ok])

  def merged(self, other: CheckResult) -> CheckResult:
    """Both results' entries (other's win on equal names)."""
    return CheckResult({**self.determined, **other.determined},
                       {**self.revealed, **other.revealed},
                       {**self.constraints, **other.constraints})


def _mean(d: Mapping[str, bool]) -> float:
  return sum(d.values()) / len(d) if d else 1.0


_STATUS = re.compile(r"\[([^\[\]]*)\]\s*$")


def parse_status_line(text: str, sep: str = " | ") -> dict[str, str] | None:
  """The trailing `[key: value | key: value ...]` of a state as a dict of
  stripped strings; None when it is absent or a part has no `key: `."""
  m = _STATUS.search(text) if isinstance(text, str) else None
  if not m:
    return None
  out = {}
  for part in m.group(1).split(sep):
    key, colon, value = part.partition(": ")
    if not colon:
      return None
    out[key.strip()] = value.strip()
  return out
