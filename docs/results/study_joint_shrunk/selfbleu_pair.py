"""Paired Self-BLEU differences (A - B) per transition, with a 95% bootstrap
interval (mdlm_wm.eval.stats.bootstrap_ci); launch.compare pairs the other
metrics, not Self-BLEU.

  python docs/results/study_joint_shrunk/selfbleu_pair.py DATA.jsonl N B.predictions.jsonl A1.predictions.jsonl [A2 ...]

N: the number of transitions the predictions cover (launch.evaluate's --max_examples).
"""
import sys

import numpy as np

from mdlm_wm.eval import evaluate as ev
from mdlm_wm.eval import metrics, stats


def per_transition(path: str, examples) -> np.ndarray:
  return np.array([metrics.self_bleu(s) for s in ev.read_predictions(path, examples)])


def main(data: str, n: str, base: str, *others: str) -> None:
  _, examples = ev.load_examples(data, 0, int(n))
  b = per_transition(base, examples)
  for path in others:
    a = per_transition(path, examples)
    mean, lo, hi = stats.bootstrap_ci(a - b)
    print(f"{path}: {a.mean():.3f} - {b.mean():.3f} = {mean:+.3f} [{lo:+.3f}, {hi:+.3f}]")


if __name__ == "__main__":
  main(*sys.argv[1:])
