"""World-model GRPO: fine-tune a supervised world model on state-check rewards.

One step, in the order it runs:
  1. draw B training transitions (a pure function of (seed, step), so a
     resumed run draws what the uninterrupted run would have);
  2. sample G next states for each with the jitted sampler (MDLM) or KV-cache
     decoder (AR), from the params being trained;
  3. move the texts to the host and score them with plain Python reward
     callables `(spec, step, prediction) -> float` (one that raises or
     returns NaN/inf is logged, counted and given `grpo.reward_on_error`);
  4. group-relative advantages on the host;
  5. old and reference log-probs, then `mu` jitted clipped policy-gradient
     updates with a KL penalty to the frozen SFT model. Old, new and
     reference log-probs use one key per step, so the MDLM estimators mask
     the same tokens for all three and the ratio compares like with like.

The only difference between MDLM and AR runs is the log-prob estimator, so
the two world models are compared by the same loop.

The checkpoints are world-model checkpoints: `WorldModel.load(workdir)` and
`launch.evaluate --workdir` read a GRPO workdir like a supervised one. The
learner, the update and the resumable loop are rl/loop.py's, shared with
agent GRPO (agents/grpo.py); this module draws and scores the rollouts.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Mapping, Sequence

import jax
import ml_collections
import numpy as np

from mdlm_wm import config as config_lib
from mdlm_wm.eval import evaluate as ev
from mdlm_wm.model import sharding
from mdlm_wm.rl import grpo, loop, rewards
from mdlm_wm.train import trainer
from mdlm_wm.world_model import WorldModel

EVAL_DIR = "eval"
# Summaries copied from each evaluation report into metrics.jsonl.
EVAL_KEYS = ("pass", "pass_all", "determined_acc", "revealed_valid", "checks", "env",
             "trailing_pass", "bleu1", "distinct_2")
PROGRESS_KEYS = ("reward_mean", "pass_rate", "kl", "rollouts_per_sec")


@dataclasses.dataclass
class GRPOResult:
  step: int
  metrics: dict
  evals: dict  # split name -> {"step": s, "pass": ...} of the last evaluation
  preempted: bool = False
  steps_run: int = 0  # 0: the workdir was already at config.train.steps

  def summary(self) -> str:
    """The launcher's last line (each evaluation printed its own as it ran)."""
    if not self.steps_run:
      return trainer.nothing_to_train(self.step)
    m = self.metrics
    return f"done: step {self.step}, reward {m['reward_mean']:.3f}, pass rate {m['pass_rate']:.3f}"


def _load_examples(paths: str, history_len: int, max_examples: int = 0):
  out = []
  for path in config_lib.split_paths(paths):
    out += ev.load_examples(path, history_len, max_examples)[1]
  return out


def _split_name(path: str) -> str:
  name = os.path.basename(path)
  for ext in (".gz", ".jsonl"):
    name = name[:-len(ext)] if name.endswith(ext) else name
  return name


def _read_report(path: str) -> dict | None:
  try:
    with open(path) as f:
      return json.load(f)
  except (OSError, ValueError):
    return None


def eval_overrides(cfg) -> dict:
  """The evaluation's sampler settings: the rollouts', then `eval_sample`'s."""
  return {**config_lib.sample_overrides(cfg.sample),
          **config_lib.sample_overrides(cfg.eval_sample)}


def evaluate_splits(wm: WorldModel, params, splits: Mapping[str, Sequence[ev.Example]],
                    cfg, step: int, workdir: str) -> dict:
  """Scores the current params on each eval split with the eval suite's metrics;
  writes WORKDIR/eval/<split>.step<N>.json (and the samples beside it,
  <split>.step<N>.predictions.jsonl) and returns the headline means.

  A report already on disk for this step and split size is reused, so a run
  killed during its (long, MDLM) evaluation does not redo finished splits.
  """
  eval_cfg = ev.EvalConfig(num_samples=cfg.train.eval_samples, seed=cfg.seed,
                           max_rollouts=0, max_steered=0)
  overrides = eval_overrides(cfg)
  predict = lambda trs, steers, g, seed: wm.texts(wm.sample_tokens(
      trs, num_samples=g, seed=seed, steers=list(steers), params=params, **overrides))
  out = {}
  os.makedirs(os.path.join(workdir, EVAL_DIR), exist_ok=True)
  for name, examples in splits.items():
    path = os.path.join(workdir, EVAL_DIR, f"{name}.step{step}.json")
    report = _read_report(path)
    if report and report.get("step") == step and report.get("examples") == len(examples):
      print(f"eval {name} @ step {step}: reusing {path}", flush=True)
      out[name] = {k: report["overall"][k]["mean"] for k in EVAL_KEYS if k in report["overall"]}
      continue
    predictions = ev.predict_all(predict, [ex.transition for ex in examples],
                                 [None] * len(examples), eval_cfg, f"eval {name}")
    # The samples too, so that two steps can be compared transition by
    # transition (launch.compare).
    ev.write_predictions(path.removesuffix(".json") + ".predictions.jsonl", examples,
                         predictions)
    report = ev.evaluate(examples, predictions, cfg=eval_cfg)
    report["step"] = step
    ev.write_report(report, path)
    out[name] = {k: report["overall"][k]["mean"] for k in EVAL_KEYS if k in report["overall"]}
  return out


def run(cfg: ml_collections.ConfigDict, workdir: str, *, max_steps: int | None = None,
        reward_fn: rewards.Reward | None = None) -> GRPOResult:
  """Runs (or resumes) world-model GRPO from the SFT checkpoint `cfg.init`.

  `reward_fn` replaces the configured rewards (a plain callable, any env);
  `max_steps` stops after that many steps of this call.
  """
  devices = jax.devices()[:cfg.mesh.num_devices] if cfg.mesh.num_devices else None
  mesh = sharding.make_mesh(cfg.mesh.shape, devices)
  config_lib.validate_grpo(cfg, mesh.shape["data"] * mesh.shape["fsdp"])
  if not cfg.init:
    raise ValueError("config.init: give the supervised workdir to start from (--init)")
  g = cfg.grpo
  B, G = g.num_prompts, g.num_generations
  wm = WorldModel.load(cfg.init, mesh=mesh)
  for key, overrides in (("sample", config_lib.sample_overrides(cfg.sample)),
                         ("eval_sample", eval_overrides(cfg))):
    try:
      wm.decode_config(**overrides)
    except ValueError as e:
      raise ValueError(f"config.{key}.{e}") from e
  tok = wm.tokenizer
  history_len = wm.cfg.data.history_len
  train_examples = _load_examples(cfg.data.train or wm.cfg.data.train, history_len)
  if len(train_examples) < B:
    raise ValueError(f"config.data.train: {len(train_examples)} transitions, fewer than "
                     f"grpo.num_prompts = {B}")
  eval_splits = {_split_name(p): _load_examples(p, history_len, cfg.train.eval_examples)
                 for p in config_lib.split_paths(cfg.data.eval)}
  reward_for: dict[str, rewards.Reward] = {}

  def reward_of(env: str) -> rewards.Reward:
    if reward_fn is not None:
      return reward_fn
    if env not in reward_for:
      reward_for[env] = rewards.make_reward(cfg.rewards.to_dict(), env)
    return reward_for[env]

  learner = loop.make_learner(
      wm.params, cfg, mesh,
      loop.logprob_fn(wm.graphdef, wm.objective, g, tok.mask_id, wm.cfg.diffusion.schedule,
                      wm.block))
  print(f"GRPO on a {wm.objective} world model ({wm.num_params:,} params), B x G = {B} x {G}, "
        f"mu {g.mu}, {len(train_examples)} training transitions, eval splits "
        f"{ {k: len(v) for k, v in eval_splits.items()} }", flush=True)
  evals = {}

  def run_eval(step: int, params) -> dict:
    logged = {}
    for name, means in evaluate_splits(wm, params, eval_splits, cfg, step, workdir).items():
      evals[name] = {"step": step, **means}
      logged.update({f"{name}/{k}": v for k, v in means.items()})
      print(f"eval {name} @ step {step}: " + " ".join(f"{k} {v:.3f}" for k, v in means.items()),
            flush=True)
    return logged

  def collect(step: int, params, key) -> tuple[dict, dict]:
    return _grpo_step(step, cfg, wm, learner, params=params, examples=train_examples,
                      reward_of=reward_of, key=key)

  result = loop.run_loop(cfg, workdir, learner, tokenizer=tok,
                         meta=loop.checkpoint_meta(wm.cfg, tok.vocab_size, cfg, cfg.init),
                         collect=collect, evaluate=run_eval if eval_splits else None,
                         rollouts_per_step=B * G, rate_key="rollouts_per_sec",
                         progress_keys=PROGRESS_KEYS, max_steps=max_steps)
  return GRPOResult(step=result.step, metrics=result.metrics, evals=evals,
                    preempted=result.preempted, steps_run=result.steps_run)


def _grpo_step(step: int, cfg, wm: WorldModel, learner: loop.Learner, *, params, examples,
               reward_of, key) -> tuple[dict, dict]:
  """Rollouts, host scoring, advantages and old/ref log-probs of one step:
  (the step's metrics, the update batch)."""
  g = cfg.grpo
  B, G = g.num_prompts, g.num_generations
  chosen = [examples[i] for i in
            np.random.default_rng([cfg.seed, step]).choice(len(examples), B, replace=False)]
  t0 = time.perf_counter()
  samples = wm.sample_tokens([ex.transition for ex in chosen], num_samples=G,
                             seed=cfg.seed * 1_000_003 + step, params=params,
                             **config_lib.sample_overrides(cfg.sample))
  texts = wm.texts(samples)
  t1 = time.perf_counter()
  items = [(f"{ex.key}/{j}", ex.episode.spec, ex.step, texts[b][j])
           for b, ex in enumerate(chosen) for j in range(G)]
  fns = [reward_of(ex.episode.env) for ex in chosen for _ in range(G)]
  scored = rewards.score_batch(fns, items, on_error=g.reward_on_error,
                               num_threads=g.score_threads)
  checks = rewards.score_batch([rewards.state_check(ex.episode.env) for ex in chosen
                                for _ in range(G)], items, num_threads=g.score_threads)
  rewards_BG = scored.rewards.reshape(B, G)
  advantages = grpo.group_advantages(rewards_BG, g.advantage)
  t2 = time.perf_counter()

  N, T = B * G, samples.tokens_BGT.shape[-1]
  completion = samples.tokens_BGT.reshape(N, T)
  host = {"context": np.repeat(samples.context_BC, G, axis=0),
          "valid": np.repeat(samples.valid_BC, G, axis=0),
          "completion": completion,
          "mask": loop.completion_mask(completion, wm.tokenizer.eot_id),
          "advantages": advantages.reshape(N).astype(np.float32)}
  batch, entropy = learner.prepare(host, key)
  t3 = time.perf_counter()
  return {
      "reward_mean": float(rewards_BG.mean()),
      "reward_std": float(rewards_BG.std()),
      "pass_rate": float(np.mean(checks.rewards == 1.0)),
      "zero_spread": grpo.zero_spread_fraction(rewards_BG),
      "reward_failures": float(len(scored.failures)),
      "entropy": entropy,
      "completion_tokens": float(host["mask"].sum(axis=1).mean()),
      "time_sample": t1 - t0, "time_score": t2 - t1, "time_logprob": t3 - t2,
  }, batch
