"""MDLM minus AR over quickstart workdirs trained with different seeds
(`python -m launch.quickstart --workdir=W --config.seed=S`): each seed's
paired mean difference per metric, their mean, and a 95% interval from
resampling transitions within each seed (the seeds themselves are not
resampled), plus the share of each model's states that parse.

  python docs/results/delta/seeds.py W0 W1 W2 ...
"""
import json
import sys

import numpy as np

from mdlm_wm.checks.result import FORMAT
from mdlm_wm.data import schema
from mdlm_wm.envs.score import check_prediction

METRICS = ("env", "pass", "determined_acc")


def main(workdirs: list[str]) -> None:
  diffs = {k: [] for k in METRICS}
  parses = {"ar": [], "mdlm": []}
  for w in workdirs:
    episodes = {e.id: e for e in schema.iter_episodes(f"{w}/data/test.jsonl")}
    rows = {m: [json.loads(line) for line in open(f"{w}/predictions_{m}.jsonl")] for m in parses}
    for m, rs in rows.items():
      parses[m].append(np.mean([
          check_prediction(episodes[r["id"]].env, episodes[r["id"]].spec,
                           episodes[r["id"]].steps[r["step"]], r["prediction"]
                           ).determined.get(FORMAT) is not False for r in rs]))
    for k in METRICS:
      diffs[k].append(np.array([b["scores"][k] - a["scores"][k]
                                for a, b in zip(rows["ar"], rows["mdlm"], strict=True)]))
  rng = np.random.default_rng(0)
  print("| MDLM - AR | " + " | ".join(f"seed {i}" for i in range(len(workdirs)))
        + " | mean [95%] |")
  print("|---|" + "---|" * (len(workdirs) + 1))
  for k, ds in diffs.items():
    boots = [np.mean([d[rng.integers(0, len(d), len(d))].mean() for d in ds])
             for _ in range(4000)]
    lo, hi = np.percentile(boots, [2.5, 97.5])
    cells = " | ".join(f"{d.mean():+.3f}" for d in ds)
    print(f"| {k} | {cells} | {np.mean([d.mean() for d in ds]):+.3f} [{lo:+.3f}, {hi:+.3f}] |")
  for m, v in parses.items():
    print(f"{m} states that parse: " + ", ".join(f"{x:.2f}" for x in v))


if __name__ == "__main__":
  main(sys.argv[1:])
