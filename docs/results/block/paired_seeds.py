"""Paired differences (A - B) in env check and pass over several runs' predictions
of the same kind of transitions, with a 95% bootstrap interval that resamples
transitions within each run (launch.compare does one pair; this pools seeds).

  python docs/results/block/paired_seeds.py A_seed0.jsonl,B_seed0.jsonl A_seed1.jsonl,B_seed1.jsonl ...

A file is a quickstart predictions file (`predictions_{mdlm,ar}.jsonl`); B may
be `copy:WORKDIR` for the copy-s_t baseline on that quickstart's transitions.
"""
import json
import sys

import numpy as np

from configs import quickstart as qs_config
from mdlm_wm import quickstart as qs
from mdlm_wm.eval import baselines
from mdlm_wm.eval import stats


def rows_of(spec: str) -> list[dict]:
  if spec.startswith("copy:"):
    examples = qs.eval_examples(qs_config.get_config(), spec[len("copy:"):] + "/data")
    predicted, _ = baselines.predictions("copy", [(ep, k) for ep, k, _ in examples])
    return qs.score_rows(examples, predicted)
  with open(spec) as f:
    return [json.loads(line) for line in f]


def main(pairs: list[str]) -> None:
  diffs = {"env": [], "pass": []}
  for pair in pairs:
    a, b = map(rows_of, pair.split(","))
    if [(r["id"], r["step"]) for r in a] != [(r["id"], r["step"]) for r in b]:
      raise ValueError(f"{pair}: the two files hold different transitions")
    for k, runs in diffs.items():
      runs.append(np.array([x["scores"][k] - y["scores"][k] for x, y in zip(a, b)]))
  for k, runs in diffs.items():
    run_of = [i for i, r in enumerate(runs) for _ in r]
    mean, lo, hi = stats.stratified_bootstrap_ci(np.concatenate(runs), run_of,
                                                 num_resamples=2000)
    print(f"{k}: {mean:+.3f} [{lo:+.3f}, {hi:+.3f}] "
          f"({sum(map(len, runs))} transitions, {len(runs)} runs)")


if __name__ == "__main__":
  main(sys.argv[1:])
