"""Per-environment corpus statistics, shared by build_corpus and check_data."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from mdlm_wm.data.schema import Episode
from mdlm_wm.data.serialize import Serializer, Truncation, transitions
from mdlm_wm.data.tokenizer import Tokenizer


@dataclasses.dataclass
class EnvStats:
  episodes: int = 0
  steps: int = 0
  successes: int = 0
  # Failed actions are only known for corpora that record `meta.failed_actions`
  # (the built-in environments do); `steps_with_failure_info` is the denominator.
  failed_actions: int = 0
  steps_with_failure_info: int = 0
  steered_episodes: int = 0
  next_state_chars: int = 0
  max_next_state_chars: int = 0
  next_state_tokens: int = 0
  max_next_state_tokens: int = 0

  def add(self, ep: Episode, tokenizer: Tokenizer | None = None) -> None:
    self.episodes += 1
    self.steps += len(ep.steps)
    self.successes += bool(ep.meta.get("success", False))
    self.steered_episodes += bool(ep.spec.steer)
    failed = ep.meta.get("failed_actions")
    if isinstance(failed, int) and not isinstance(failed, bool):
      self.failed_actions += failed
      self.steps_with_failure_info += len(ep.steps)
    lengths = [len(s.next_state) for s in ep.steps]
    self.next_state_chars += sum(lengths)
    self.max_next_state_chars = max(self.max_next_state_chars, *lengths)
    if tokenizer is not None:
      ntok = [len(ids) for ids in tokenizer.encode_batch([s.next_state for s in ep.steps])]
      self.next_state_tokens += sum(ntok)
      self.max_next_state_tokens = max(self.max_next_state_tokens, *ntok)

  def summary(self, with_tokens: bool) -> dict:
    steps = max(self.steps, 1)
    out = {
        "episodes": self.episodes,
        "steps": self.steps,
        "success_rate": round(self.successes / max(self.episodes, 1), 4),
        "steered_fraction": round(self.steered_episodes / max(self.episodes, 1), 4),
        "failed_action_fraction": (round(self.failed_actions / self.steps_with_failure_info, 4)
                                   if self.steps_with_failure_info else None),
        "mean_next_state_chars": round(self.next_state_chars / steps, 1),
        "max_next_state_chars": self.max_next_state_chars,
    }
    if with_tokens:
      out.update(next_state_tokens=self.next_state_tokens,
                 mean_next_state_tokens=round(self.next_state_tokens / steps, 1),
                 max_next_state_tokens=self.max_next_state_tokens)
    return out


def collect(episodes: Iterable[Episode], tokenizer: Tokenizer | None = None) -> dict[str, EnvStats]:
  stats: dict[str, EnvStats] = {}
  for ep in episodes:
    stats.setdefault(ep.env or "(none)", EnvStats()).add(ep, tokenizer)
  return stats


def merge(into: dict[str, EnvStats], other: dict[str, EnvStats]) -> None:
  for env, st in other.items():
    acc = into.setdefault(env, EnvStats())
    for f in dataclasses.fields(EnvStats):
      a, b = getattr(acc, f.name), getattr(st, f.name)
      setattr(acc, f.name, max(a, b) if f.name.startswith("max_") else a + b)


def format_table(stats: dict[str, EnvStats], with_tokens: bool) -> str:
  """A fixed-width table, one row per environment plus a total row."""
  total: dict[str, EnvStats] = {}
  for st in stats.values():
    merge(total, {"TOTAL": st})
  cols = ["episodes", "steps", "success_rate", "failed_action_fraction",
          "mean_next_state_chars", "max_next_state_chars"]
  if with_tokens:
    cols += ["next_state_tokens", "mean_next_state_tokens", "max_next_state_tokens"]
  short = {"success_rate": "success", "failed_action_fraction": "failed_act",
           "mean_next_state_chars": "mean_chars", "max_next_state_chars": "max_chars",
           "next_state_tokens": "tokens", "mean_next_state_tokens": "mean_tok",
           "max_next_state_tokens": "max_tok"}
  rows = [["env"] + [short.get(c, c) for c in cols]]
  for env, st in sorted(stats.items()) + sorted(total.items()):
    s = st.summary(with_tokens)
    rows.append([env] + ["-" if s[c] is None else str(s[c]) for c in cols])
  return _fixed_width(rows)


def _fixed_width(rows: list[list[str]]) -> str:
  widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
  return "\n".join("  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in
                             enumerate(zip(r, widths))) for r in rows)


def truncation_by_env(episodes: Iterable[Episode], serializer: Serializer) -> dict[str, Truncation]:
  """What `serializer`'s truncation policy cuts from every transition, per environment."""
  out: dict[str, Truncation] = {}
  for ep in episodes:
    acc = out.setdefault(ep.env or "(none)", Truncation())
    for tr in transitions(ep, serializer.history_len):
      acc.add(serializer.serialize(tr).truncation)
  return out


def format_truncation(table: dict[str, Truncation]) -> str:
  """One row per environment plus a total: the share of examples with all five
  anchors whole, then every counter (tokens cut, examples cut)."""
  total = Truncation()
  for t in table.values():
    total.add(t)
  fields = [k for k in total.as_dict() if k != "examples"]
  rows = [["env", "examples", "anchors_whole"] + fields]
  for env, t in sorted(table.items()) + [("TOTAL", total)]:
    d = t.as_dict()
    rows.append([env, str(t.examples), f"{t.anchors_whole():.3f}"] + [str(d[k]) for k in fields])
  return _fixed_width(rows)
