"""The main job: corpus -> MDLM and AR world models -> predictions -> a side-by-side table.

Every stage writes under WORKDIR and is skipped when its output is already
there (a rerun after a crash resumes training from its checkpoint), so
`python -m launch.quickstart` can be run again at any time.
"""

from __future__ import annotations

import collections
import copy
import json
import os
import time

import numpy as np

from mdlm_wm.checks.score import score_prediction
from mdlm_wm.data import corpus, schema
from mdlm_wm.data.serialize import transitions
from mdlm_wm.train.trainer import train
from mdlm_wm.world_model import WorldModel

OBJECTIVES = ("mdlm", "ar")


def build_data(cfg, workdir: str) -> str:
  data_dir = os.path.join(workdir, "data")
  ccfg = corpus.CorpusConfig.from_config(cfg.corpus)
  stats_path = os.path.join(data_dir, "stats.json")
  if os.path.exists(stats_path):
    with open(stats_path) as f:
      if json.load(f)["config"] == corpus.config_dict(ccfg):
        print(f"[data] reusing {data_dir}")
        return data_dir
    print(f"[data] {data_dir} was built with another corpus config; rebuilding")
  result = corpus.build_corpus(ccfg, data_dir)
  print(corpus.format_summary(result))
  return data_dir


def train_models(cfg, workdir: str, data_dir: str) -> dict[str, str]:
  dirs = {}
  for objective in OBJECTIVES:
    c = copy.deepcopy(cfg)
    c.objective = objective
    c.data.train = os.path.join(data_dir, "train.jsonl")
    c.data.valid = os.path.join(data_dir, "valid.jsonl")
    c.data.tokenizer = os.path.join(data_dir, corpus.TOKENIZER_FILE)
    dirs[objective] = os.path.join(workdir, objective)
    print(f"\n[train] {objective} -> {dirs[objective]}", flush=True)
    train(c, dirs[objective])
  return dirs


def eval_examples(cfg, data_dir: str):
  """The first `examples_per_env` test transitions of each environment, as
  (episode, step index, transition)."""
  per_env = collections.defaultdict(list)
  for ep in schema.iter_episodes(os.path.join(data_dir, "test.jsonl")):
    for k, tr in enumerate(transitions(ep, cfg.data.history_len)):
      if len(per_env[ep.env]) < cfg.eval.examples_per_env:
        per_env[ep.env].append((ep, k, tr))
  return [x for env in sorted(per_env) for x in per_env[env]]


def _cached_rows(path: str) -> list[dict] | None:
  """The rows of an earlier run's predictions file; None when there is none or
  it predates the `step`/`scores` fields (it is then written again)."""
  if not os.path.exists(path):
    return None
  with open(path) as f:
    rows = [json.loads(line) for line in f]
  return rows if rows and all("step" in r and "scores" in r for r in rows) else None


def predict_and_score(cfg, model_dir: str, examples, out_path: str) -> dict:
  """Greedy next states for `examples`, scored; rows written to `out_path`
  ({id, env, step, ...}: launch.compare and launch.evaluate --predictions read it)."""
  rows = _cached_rows(out_path)
  if rows is None:
    wm = WorldModel.load(model_dir)
    rows, t0 = [], time.perf_counter()
    bs = cfg.eval.batch_size
    for i in range(0, len(examples), bs):
      chunk = examples[i:i + bs]
      preds = wm.generate([tr for _, _, tr in chunk], num_samples=1, seed=i, temperature=0.0)
      for (ep, k, _), (pred,) in zip(chunk, preds):
        step = ep.steps[k]
        rows.append({"id": ep.id, "env": ep.env, "step": k, "action": step.action,
                     "reference": step.next_state, "prediction": pred,
                     "scores": score_prediction(ep.env, ep.spec, step, pred)})
    print(f"[sample] {len(rows)} predictions in {time.perf_counter() - t0:.1f}s -> {out_path}")
    tmp = out_path + ".tmp"
    with open(tmp, "w") as f:
      f.writelines(json.dumps(r) + "\n" for r in rows)
    os.replace(tmp, out_path)
  return {"examples": len(rows),
          "exact_match": float(np.mean([r["scores"]["exact"] for r in rows])),
          "checks_score": float(np.mean([r["scores"]["checks"] for r in rows])),
          "env_score": float(np.mean([r["scores"].get("env", r["scores"]["checks"])
                                      for r in rows])),
          "pass_rate": float(np.mean([r["scores"]["pass"] for r in rows]))}


def final_losses(model_dir: str) -> dict:
  out = {}
  with open(os.path.join(model_dir, "metrics.jsonl")) as f:
    for line in f:
      row = json.loads(line)
      for k in ("loss", "valid_loss"):
        if k in row:
          out[k] = row[k]
          out.setdefault(f"first_{k}", row[k])
  return out


def format_table(summary: dict) -> str:
  cols = [("first_loss", "first loss"), ("loss", "train loss"), ("valid_loss", "valid loss"),
          ("exact_match", "exact match"), ("checks_score", "checks score"),
          ("env_score", "env-check score"), ("pass_rate", "pass rate")]
  lines = ["| model | " + " | ".join(name for _, name in cols) + " |",
           "|---|" + "---|" * len(cols)]
  for objective, m in summary.items():
    cells = [f"{m[k]:.3f}" if isinstance(m.get(k), float) else "-" for k, _ in cols]
    lines.append(f"| {objective} | " + " | ".join(cells) + " |")
  return "\n".join(lines)


def run(cfg, workdir: str) -> dict:
  os.makedirs(workdir, exist_ok=True)
  data_dir = build_data(cfg, workdir)
  dirs = train_models(cfg, workdir, data_dir)
  examples = eval_examples(cfg, data_dir)
  summary = {}
  for objective, model_dir in dirs.items():
    summary[objective] = {**final_losses(model_dir), **predict_and_score(
        cfg, model_dir, examples, os.path.join(workdir, f"predictions_{objective}.jsonl"))}
  with open(os.path.join(workdir, "summary.json"), "w") as f:
    json.dump(summary, f, indent=2)
  print("\n" + format_table(summary))
  print(f"\nscored on {len(examples)} test transitions ({cfg.eval.examples_per_env} per "
        "environment), greedy decoding; losses in nats/token (MDLM: ELBO)")
  show_examples(workdir, n=3)
  return summary


def show_examples(workdir: str, n: int) -> None:
  rows = {}
  for objective in OBJECTIVES:
    with open(os.path.join(workdir, f"predictions_{objective}.jsonl")) as f:
      rows[objective] = [json.loads(line) for line in f]
  picked = np.linspace(0, len(rows["mdlm"]) - 1, n).astype(int)
  for i in picked:
    r = rows["mdlm"][i]
    print(f"\n--- {r['id']} | action: {r['action']}\nreference: {r['reference']}")
    for objective in OBJECTIVES:
      p = rows[objective][i]
      sc = p["scores"]
      print(f"{objective:>9}: {p['prediction']}  [pass {sc['pass']:.0f}, env {sc.get('env', 0):.2f}]")
