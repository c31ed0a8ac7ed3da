"""The two reference points every report shows beside a world model.

* `copy`: the next state is the current state s_t. The floor: most actions
  change only part of a state, so a model must beat this, not zero.
* `twin`: the next state of a twin world that keeps everything revealed up
  to s_t and re-draws every hidden fact not yet revealed (envs/twin.py). The
  ceiling: a perfectly informed simulator that cannot know the hidden draws.
  If it fails a check, the check asks for information no model has.

Both predict one next state per transition from the recorded episode alone.
The twin rebuilds built-in worlds from `meta.seed`; transitions of real
environments, unknown environments, or built-in ones without a twin world
(`Env.fork_hidden` not implemented) get no prediction and are counted per
reason instead.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Sequence

from mdlm_wm.data.schema import Episode
from mdlm_wm.envs import registry, twin
from mdlm_wm.eval import evaluate as ev

BASELINES = ("copy", "twin")
# How each baseline is named in tables (the quickstart's rows, report labels).
TITLES = {"copy": "copy s_t", "twin": "twin"}
NOT_BUILTIN = "not a built-in environment"
NO_TWIN = "no twin world (fork_hidden not implemented)"


def copy_predictions(transitions: Sequence[tuple[Episode, int]]) -> list[str]:
  """s_t for every (episode, step index)."""
  return [ep.steps[k].state for ep, k in transitions]


def twin_predictions(transitions: Sequence[tuple[Episode, int]]
                     ) -> tuple[list[str | None], dict[str, int]]:
  """The twin world's next state for every (episode, step index), None where
  there is none, and the number of transitions skipped per reason."""
  builtin = set(registry.env_names())
  per_episode: dict[int, list[str] | str] = {}
  out: list[str | None] = []
  skipped: collections.Counter = collections.Counter()
  for ep, k in transitions:
    if id(ep) not in per_episode:
      per_episode[id(ep)] = _twin_states(ep, builtin)
    states = per_episode[id(ep)]
    if isinstance(states, str):
      skipped[states] += 1
      out.append(None)
    else:
      out.append(states[k])
  return out, dict(sorted(skipped.items()))


def _twin_states(ep: Episode, builtin: set[str]) -> list[str] | str:
  """Every step's twin next state, or the reason the episode has none."""
  if ep.env not in builtin:
    return NOT_BUILTIN
  try:
    return twin.twin_next_states(ep)
  except NotImplementedError:
    return NO_TWIN


def predictions(kind: str, transitions: Sequence[tuple[Episode, int]]
                ) -> tuple[list[str | None], dict[str, int]]:
  """`kind`'s prediction per transition (None: skipped) and the skip counts."""
  if kind == "copy":
    return copy_predictions(transitions), {}
  if kind == "twin":
    return twin_predictions(transitions)
  raise ValueError(f"unknown baseline {kind!r}; expected one of {BASELINES}")


def skip_note(kind: str, total: int, skipped: dict[str, int]) -> str | None:
  """One line saying which transitions `kind` could not predict, or None."""
  if not skipped:
    return None
  reasons = ", ".join(f"{n} {why}" for why, n in skipped.items())
  return (f"{TITLES[kind]}: scored {total - sum(skipped.values())} of {total} transitions; "
          f"skipped {reasons}")


@dataclasses.dataclass(frozen=True)
class BaselineRun:
  report: dict  # evaluate.evaluate's report on `examples`
  examples: list[ev.Example]  # the transitions the baseline predicted
  samples: list[list[str]]  # its one prediction for each
  selected: int  # transitions asked for (predicted + skipped)
  skipped: dict[str, int]  # transitions left out, per reason


def evaluate_baseline(kind: str, examples: Sequence[ev.Example],
                      cfg: ev.EvalConfig = ev.EvalConfig()) -> BaselineRun:
  """Baseline `kind` scored on `examples` as a model is (one sample each);
  the transitions it cannot predict are left out and counted."""
  predicted, skipped = predictions(kind, [(ex.episode, ex.index) for ex in examples])
  kept = [(ex, [p]) for ex, p in zip(examples, predicted) if p is not None]
  if not kept:
    raise ValueError(f"the {kind} baseline predicts none of the {len(examples)} selected "
                     f"transitions ({skip_note(kind, len(examples), skipped)})")
  scored, samples = [ex for ex, _ in kept], [s for _, s in kept]
  report = ev.evaluate(scored, samples, cfg=dataclasses.replace(cfg, num_samples=1))
  return BaselineRun(report, scored, samples, len(examples), skipped)
