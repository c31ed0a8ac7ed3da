"""Where a world model loses to the copy of s_t: its accuracy on the
determined facts that the copy gets right ("copyable": the fact is the same
in s_t) and on the rest ("changed"), over all predictions and over those
that parse. Reads a quickstart workdir's predictions_{ar,mdlm}.jsonl.

  python docs/results/block/copyable.py QUICKSTART_WORKDIR
"""
import collections
import json
import sys

from mdlm_wm.checks.result import FORMAT
from mdlm_wm.data import schema
from mdlm_wm.envs.score import check_prediction


def main(workdir: str) -> None:
  episodes = {e.id: e for e in schema.iter_episodes(f"{workdir}/data/test.jsonl")}
  preds = {m: [json.loads(line) for line in open(f"{workdir}/predictions_{m}.jsonl")]
           for m in ("ar", "mdlm")}
  right = collections.Counter()
  count = collections.Counter()
  copies = {}  # (id, step) -> the copy of s_t's determined facts, checked once
  for m, rows in preds.items():
    for row in rows:
      ep = episodes[row["id"]]
      step = ep.steps[row["step"]]
      key = (row["id"], row["step"])
      if key not in copies:
        copies[key] = check_prediction(ep.env, ep.spec, step, step.state).determined
      copy = copies[key]
      got = check_prediction(ep.env, ep.spec, step, row["prediction"]).determined
      parsed = got.get(FORMAT) is not False
      for fact, copy_ok in copy.items():
        if fact == FORMAT:
          continue
        kind = "copyable" if copy_ok else "changed"
        for key in [(m, kind, "all")] + ([(m, kind, "parsed")] if parsed else []):
          right[key] += bool(got.get(fact))
          count[key] += 1
  print("| model | facts | of all predictions | of those that parse |")
  print("|---|---|---|---|")
  for m in preds:
    for kind in ("copyable", "changed"):
      cells = [f"{right[m, kind, w] / count[m, kind, w]:.3f} (n {count[m, kind, w]})"
               for w in ("all", "parsed")]
      print(f"| {m} | {kind} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
  main(sys.argv[1])
