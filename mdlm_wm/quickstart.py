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

from mdlm_wm import config as config_lib
from mdlm_wm import corpus
from mdlm_wm.data import schema
from mdlm_wm.data.serialize import transitions
from mdlm_wm.envs.score import format_check, score_prediction
from mdlm_wm.eval import baselines
from mdlm_wm.train import state as train_state
from mdlm_wm.train import checkpoint
from mdlm_wm.train.trainer import train
from mdlm_wm.world_model import WorldModel

# Trained in this order: the MDLM may start from the AR's checkpoint.
TRAIN_ORDER = ("ar", "mdlm")


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
  dirs = {objective: os.path.join(workdir, objective) for objective in config_lib.OBJECTIVES}
  for objective in TRAIN_ORDER:
    c = copy.deepcopy(cfg)
    c.objective = objective
    c.data.train = os.path.join(data_dir, "train.jsonl")
    c.data.valid = os.path.join(data_dir, "valid.jsonl")
    c.data.tokenizer = os.path.join(data_dir, corpus.TOKENIZER_FILE)
    if objective == "ar":
      # The AR's rows hold one copy of the target, the MDLM's two: the AR
      # packs rows of context + target (384 tokens in configs/quickstart.py,
      # its configuration before block diffusion), so both see about as many
      # examples per step.
      c.data.seq_len = cfg.data.max_context_len + cfg.data.max_target_len
    start = cfg.train.ar_start_steps
    if objective == "mdlm" and start:
      c.train.init_from, c.train.init_step = dirs["ar"], start
      c.train.steps, c.train.ar_start_steps = cfg.train.steps - start, 0
      c.optim.lr = cfg.train.ar_start_lr or cfg.optim.lr
      c.optim.warmup_steps = min(cfg.optim.warmup_steps, c.train.steps - 1)
      print(f"\n[train] mdlm -> {dirs[objective]}: the AR's step {start} adapted for "
            f"{c.train.steps} steps ({cfg.train.steps} in all, as the AR)", flush=True)
    else:
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


def _cached_rows(path: str, examples, made_with: dict) -> list[dict] | None:
  """The rows of an earlier run's predictions file; None when there is none,
  it predates the `step`/`scores` fields, it holds other transitions than
  `examples`, or it was made by another checkpoint or other sampler settings
  than `made_with` says (it is then written again)."""
  if not os.path.exists(path):
    return None
  with open(path) as f:
    rows = [json.loads(line) for line in f]
  if not all("step" in r and "scores" in r and r.get("made_with") == made_with for r in rows):
    return None
  keys = [(r["id"], r["step"]) for r in rows]
  return rows if keys == [(ep.id, k) for ep, k, _ in examples] else None


def _latest_step(model_dir: str) -> int | None:
  latest = checkpoint.latest_meta(os.path.join(model_dir, train_state.CHECKPOINT_DIR))
  return latest[0] if latest else None


def _write_rows(path: str, rows: list[dict]) -> None:
  tmp = path + ".tmp"
  with open(tmp, "w") as f:
    f.writelines(json.dumps(r) + "\n" for r in rows)
  os.replace(tmp, path)


def score_rows(examples, predictions) -> list[dict]:
  """One row per (example, prediction): what a predictions file holds."""
  rows = []
  for (ep, k, _), pred in zip(examples, predictions, strict=True):
    step = ep.steps[k]
    rows.append({"id": ep.id, "env": ep.env, "step": k, "action": step.action,
                 "reference": step.next_state, "prediction": pred,
                 "scores": score_prediction(ep.env, ep.spec, step, pred)})
  return rows


def rows_summary(rows: list[dict]) -> dict:
  """The table's means over `rows` (None when there are no rows); `env_score`
  is the `checks` score where the environment registers no checker, which
  also counts every state as well formed. `first_draw_well_formed`: the
  share that parsed at the first draw, before any format retry."""
  mean = lambda key, default="checks": (
      float(np.mean([r["scores"].get(key, r["scores"].get(default, 1.0)) for r in rows]))
      if rows else None)
  first = [r["scores"].get("well_formed", 1.0) * (r.get("draws", 1) == 1) for r in rows]
  return {"examples": len(rows), "exact_match": mean("exact"), "checks_score": mean("checks"),
          "env_score": mean("env"), "well_formed": mean("well_formed", default=None),
          "first_draw_well_formed": float(np.mean(first)) if rows else None,
          "pass_rate": mean("pass"), "pass_all_rate": mean("pass_all"),
          "determined_acc": mean("determined_acc"), "revealed_valid": mean("revealed_valid")}


def predict_and_score(cfg, model_dir: str, examples, out_path: str) -> dict:
  """Greedy next states for `examples` with `cfg.sample`'s settings, scored;
  rows written to `out_path` ({id, env, step, ...}: launch.compare and
  launch.evaluate --predictions read it). A file from an earlier run is
  reused (and re-scored with the current checks) when the same checkpoint
  made it with the same settings."""
  settings = {**{k: cfg.sample[k] for k in config_lib.SAMPLER_SETTINGS}, "temperature": 0.0}
  retries = {k: cfg.sample[k] for k in ("format_retries", "retry_temperature")}
  made_with = {"checkpoint": _latest_step(model_dir), "sample": {**settings, **retries}}
  rows = _cached_rows(out_path, examples, made_with)
  if rows is None:
    wm = WorldModel.load(model_dir)
    preds, draws, t0 = [], [], time.perf_counter()
    bs = cfg.eval.batch_size
    for i in range(0, len(examples), bs):
      chunk = examples[i:i + bs]
      trs = [tr for _, _, tr in chunk]
      first = wm.generate(trs, num_samples=1, seed=i, **settings)
      texts, draws_BG = wm.redraw(
          trs, first, [format_check(ep.env, ep.spec) for ep, _, _ in chunk],
          seed=i, retries=retries["format_retries"],
          retry_temperature=retries["retry_temperature"], **settings)
      preds += [p for (p,) in texts]
      draws += [int(d) for (d,) in draws_BG]
    rows = [{**r, "draws": d, "made_with": made_with}
            for r, d in zip(score_rows(examples, preds), draws, strict=True)]
    print(f"[sample] {len(rows)} predictions in {time.perf_counter() - t0:.1f}s -> {out_path}")
    _write_rows(out_path, rows)
  else:
    rescored = [{**r, "draws": r.get("draws", 1), "made_with": made_with}
                for r in score_rows(examples, [r["prediction"] for r in rows])]
    if rescored != rows:
      _write_rows(out_path, rescored)
    rows = rescored
  return rows_summary(rows)


def baseline_scores(examples) -> tuple[dict, list[str]]:
  """The copy-s_t and twin rows on `examples` (the twin on those it can
  rebuild), keyed by their table names, and a note per baseline that skipped
  transitions."""
  pairs = [(ep, k) for ep, k, _ in examples]
  out, notes = {}, []
  for kind in baselines.BASELINES:
    try:
      predicted, skipped = baselines.predictions(kind, pairs)
    except ValueError as e:  # a twin cannot replay a corpus of older environment code
      notes.append(f"{baselines.TITLES[kind]}: not scored: {e}; rebuild the corpus (a new "
                   "WORKDIR) to get it")
      continue
    kept = [(x, p) for x, p in zip(examples, predicted) if p is not None]
    out[baselines.TITLES[kind]] = rows_summary(score_rows([x for x, _ in kept],
                                                          [p for _, p in kept]))
    note = baselines.skip_note(kind, len(examples), skipped)
    notes += [note] if note else []
  return out, notes


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


def format_table(summary: dict, baseline_rows: dict | None = None) -> str:
  """One row per model, then one per baseline (`baseline_scores`)."""
  cols = [("first_loss", "first loss"), ("loss", "train loss"), ("valid_loss", "valid loss"),
          ("exact_match", "exact match"), ("checks_score", "checks score"),
          ("env_score", "env-check score"), ("well_formed", "parses"), ("pass_rate", "pass"),
          ("pass_all_rate", "pass_all")]
  lines = ["| model | " + " | ".join(name for _, name in cols) + " |",
           "|---|" + "---|" * len(cols)]
  for name, m in {**summary, **(baseline_rows or {})}.items():
    cells = [f"{m[k]:.3f}" if isinstance(m.get(k), float) else "-" for k, _ in cols]
    lines.append(f"| {name} | " + " | ".join(cells) + " |")
  return "\n".join(lines)


def _written(cfg) -> str:
  """What the models' losses are per token of."""
  return ("delta target (s_{t+1} as its change from s_t)" if config_lib.target(cfg) == "delta"
          else "target")


def _retry_note(cfg, summary: dict) -> str:
  """What `parses` means under this run's format retries."""
  retries = cfg.sample.format_retries
  if not retries:
    return "parses: states the environment's parser accepts (no format retries)"
  firsts = ", ".join(f"{name} {m['first_draw_well_formed']:.3f}" for name, m in summary.items())
  return (f"parses: states the environment's parser accepts after up to {retries} format "
          f"retries at temperature {cfg.sample.retry_temperature} (sample.format_retries); at "
          f"the first, greedy draw: {firsts}")


def run(cfg, workdir: str) -> dict:
  os.makedirs(workdir, exist_ok=True)
  data_dir = build_data(cfg, workdir)
  dirs = train_models(cfg, workdir, data_dir)
  examples = eval_examples(cfg, data_dir)
  summary = {}
  for objective, model_dir in dirs.items():
    summary[objective] = {**final_losses(model_dir), **predict_and_score(
        cfg, model_dir, examples, os.path.join(workdir, f"predictions_{objective}.jsonl"))}
  baseline_rows, notes = baseline_scores(examples)
  with open(os.path.join(workdir, "summary.json"), "w") as f:
    json.dump({**summary, "baselines": baseline_rows}, f, indent=2)
  print("\n" + format_table(summary, baseline_rows))
  print(f"\nscored on {len(examples)} test transitions ({cfg.eval.examples_per_env} per "
        f"environment), greedy decoding; losses in nats per {_written(cfg)} token (MDLM: "
        "ELBO); pass: every determined fact and constraint right, pass_all: every fact "
        "(also hidden draws); baselines: copy s_t (floor), twin world (ceiling)")
  print(_retry_note(cfg, summary))
  for note in notes:
    print(note)
  show_examples(workdir, n=3)
  return summary


def show_examples(workdir: str, n: int) -> None:
  rows = {}
  for objective in config_lib.OBJECTIVES:
    with open(os.path.join(workdir, f"predictions_{objective}.jsonl")) as f:
      rows[objective] = [json.loads(line) for line in f]
  picked = np.linspace(0, len(rows["mdlm"]) - 1, n).astype(int)
  for i in picked:
    r = rows["mdlm"][i]
    print(f"\n--- {r['id']} | action: {r['action']}\nreference: {r['reference']}")
    for objective in config_lib.OBJECTIVES:
      p = rows[objective][i]
      sc = p["scores"]
      print(f"{objective:>9}: {p['prediction']}  [pass {sc['pass']:.0f}, env {sc.get('env', 0):.2f}]")
