"""Greedy next states of one workdir (WORKDIR or WORKDIR@STEP) for the first 10
test transitions per environment, scored, under each sampler setting given:
  python docs/results/block/probe.py WORKDIR CORPUS/test.jsonl '[{"temperature": 0.0}, ...]'
"""
import json, sys, time, numpy as np
from mdlm_wm.world_model import WorldModel
from mdlm_wm.envs import registry
from mdlm_wm.envs.score import score_prediction
from mdlm_wm.checks.result import FORMAT
from mdlm_wm.data import schema
from mdlm_wm.data.serialize import transitions
wd = sys.argv[1]; data = sys.argv[2]; settings = json.loads(sys.argv[3])
wd, _, st = wd.partition("@"); wm = WorldModel.load(wd, step=int(st) if st else None)
per_env = {}
for ep in schema.iter_episodes(data):
  for k, tr in enumerate(transitions(ep, wm.cfg.data.history_len)):
    per_env.setdefault(ep.env, [])
    if len(per_env[ep.env]) < 10: per_env[ep.env].append((ep, k, tr))
ex = [x for e in sorted(per_env) for x in per_env[e]]
for s in settings:
  t0 = time.time(); rows = []
  for i in range(0, len(ex), 25):
    chunk = ex[i:i+25]
    preds = wm.generate([tr for _, _, tr in chunk], num_samples=1, seed=i, **s)
    for (ep, k, _), (p,) in zip(chunk, preds):
      rows.append({**score_prediction(ep.env, ep.spec, ep.steps[k], p),
                   "parsed": float(registry.check_fn(ep.env)(ep.spec, ep.steps[k], p)
                                   .determined.get(FORMAT, True))})
  print(s, f"{time.time()-t0:.0f}s", {k: round(float(np.mean([r[k] for r in rows])), 3) for k in ("parsed", "env", "pass", "pass_all", "determined_acc", "revealed_valid")}, flush=True)
