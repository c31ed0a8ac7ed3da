"""Are the state checks fair? Per environment, on one corpus split: the share
of facts marked revealed, the reference's pass_all (must be 1), the twin
world's pass (the ceiling: must be ~1, or a check asks for hidden
information) and the copy-s_t floor."""

from __future__ import annotations

import collections

import numpy as np

from mdlm_wm.data import schema
from mdlm_wm.envs import twin
from mdlm_wm.envs.score import score_prediction

PREDICTORS = ("reference", "twin", "copy")


def fairness(path: str, max_episodes: int = 0) -> dict[str, dict[str, float]]:
  """{env or "all": {transitions, revealed_share, reference_pass_all, twin_pass,
  twin_pass_all, copy_pass, copy_pass_all}} over the episodes of `path`
  (built-in environments: the twin replays each episode from its seed)."""
  scores = collections.defaultdict(lambda: collections.defaultdict(list))
  counts = collections.defaultdict(lambda: [0, 0])  # facts, revealed
  for n, ep in enumerate(schema.iter_episodes(path)):
    if max_episodes and n >= max_episodes:
      break
    twins = twin.twin_next_states(ep)
    for step, twin_state in zip(ep.steps, twins):
      c = step.checks
      counts[ep.env][0] += len(c.fields) + len(c.must_include) + len(c.must_exclude)
      counts[ep.env][1] += len(c.revealed)
      for name, pred in zip(PREDICTORS, (step.next_state, twin_state, step.state)):
        s = score_prediction(ep.env, ep.spec, step, pred)
        for key in ("pass", "pass_all"):
          for group in (ep.env, "all"):
            scores[group][f"{name}_{key}"].append(s[key])
  counts["all"] = [sum(c[i] for c in counts.values()) for i in (0, 1)]
  return {group: {"transitions": len(v["copy_pass"]),
                  "revealed_share": counts[group][1] / max(counts[group][0], 1),
                  **{k: float(np.mean(x)) for k, x in v.items()}}
          for group, v in sorted(scores.items(), key=lambda kv: (kv[0] == "all", kv[0]))}


def format_table(table: dict[str, dict[str, float]]) -> str:
  cols = ("revealed_share", "reference_pass_all", "twin_pass", "twin_pass_all", "copy_pass",
          "copy_pass_all")
  lines = ["| env | transitions | " + " | ".join(c.replace("_", " ") for c in cols) + " |",
           "|---|---|" + "---|" * len(cols)]
  for env, m in table.items():
    lines.append(f"| {env} | {m['transitions']} | "
                 + " | ".join(f"{m[c]:.3f}" for c in cols) + " |")
  return "\n".join(lines)
