"""Greedy predictions of an old-recipe workdir (run with the old code first on
sys.path) for every transition of a corpus file, in launch.evaluate's
predictions format (one line per transition, id/step/samples)."""
import json, sys, time
from mdlm_wm.world_model import WorldModel
from mdlm_wm.data import schema
from mdlm_wm.data.serialize import transitions
wd, data, out = sys.argv[1:4]
limit = int(sys.argv[4]) if len(sys.argv) > 4 else 0
wm = WorldModel.load(wd)
rows = []
for ep in schema.load_episodes(data):
  for k, tr in enumerate(transitions(ep, wm.cfg.data.history_len)):
    rows.append((ep, k, tr))
if limit:  # round-robin over environments, as launch.evaluate --max_examples takes them
  by_env = {}
  for row in rows:
    by_env.setdefault(row[0].env, []).append(row)
  groups = list(by_env.values())
  rows = [g[i] for i in range(max(map(len, groups))) for g in groups if i < len(g)][:limit]
t0 = time.time()
with open(out + ".tmp", "w") as f:
  for i in range(0, len(rows), 32):
    chunk = rows[i:i + 32]
    preds = wm.generate([tr for _, _, tr in chunk], num_samples=1, seed=i, temperature=0.0)
    for (ep, k, tr), (p,) in zip(chunk, preds):
      f.write(json.dumps({"id": ep.id, "env": ep.env, "step": k, "action": tr.action,
                          "reference": tr.next_state, "samples": [p]}) + "\n")
    print(f"{i + len(chunk)}/{len(rows)} {time.time() - t0:.0f}s", flush=True)
import os; os.replace(out + ".tmp", out)
