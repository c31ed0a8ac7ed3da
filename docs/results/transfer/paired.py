"""Paired differences in real-game success between transfer-study arms, per
game (same env and seed), pooled over GRPO seeds: arm A's seeds are averaged
per game, then A - B with a 95% bootstrap interval over games.

  python docs/results/transfer/paired.py EVAL_DIR grpo_mdlm,grpo_mdlm_seed1 grpo_ar,grpo_ar_seed1

Each arm is comma-separated report names in EVAL_DIR (NAME.json from
launch.evaluate_agent); a single name is one seed.
"""
import json
import os
import sys

import numpy as np

from mdlm_wm.eval import stats


def per_game(eval_dir: str, names: str) -> dict[tuple[str, int], float]:
  """Success per (env, seed), averaged over the reports `names`."""
  runs = []
  for name in names.split(","):
    with open(os.path.join(eval_dir, f"{name}.json")) as f:
      runs.append({(e["env"], e["seed"]): e["success"] for e in json.load(f)["episodes"]})
  games = set.intersection(*(set(r) for r in runs))
  return {g: float(np.mean([r[g] for r in runs])) for g in sorted(games)}


def main(eval_dir: str, a: str, b: str) -> None:
  sa, sb = per_game(eval_dir, a), per_game(eval_dir, b)
  games = sorted(set(sa) & set(sb))
  diffs = [sa[g] - sb[g] for g in games]
  mean, low, high = stats.bootstrap_ci(diffs)
  print(f"{a} - {b}: {mean:+.3f} [{low:+.3f}, {high:+.3f}] over {len(games)} games "
        f"({np.mean([sa[g] for g in games]):.3f} vs {np.mean([sb[g] for g in games]):.3f})")


if __name__ == "__main__":
  main(*sys.argv[1:4])
