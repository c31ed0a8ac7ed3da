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
`launch.evaluate --workdir` read a GRPO workdir like a supervised one.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import time
from collections.abc import Mapping, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from absl import logging
from flax import nnx

from mdlm_wm import config as config_lib
from mdlm_wm.diffusion import sampler as mdlm_sampler
from mdlm_wm.eval import evaluate as ev
from mdlm_wm.model import sharding
from mdlm_wm.rl import grpo, logprob, rewards
from mdlm_wm.train import trainer
from mdlm_wm.train.checkpoint import Checkpointer
from mdlm_wm.train.metrics import MetricsWriter, StepProgress
from mdlm_wm.world_model import WorldModel

EVAL_DIR = "eval"
# Summaries copied from each evaluation report into metrics.jsonl.
EVAL_KEYS = ("pass", "checks", "env", "trailing_pass", "bleu1", "distinct_2")
PROGRESS_KEYS = ("reward_mean", "pass_rate", "kl", "rollouts_per_sec")


@dataclasses.dataclass
class GRPOResult:
  step: int
  metrics: dict
  evals: dict  # split name -> {"step": s, "pass": ...} of the last evaluation
  preempted: bool = False


def completion_mask(tokens_NT: np.ndarray, eot_id: int) -> np.ndarray:
  """Canvas positions that make the text: up to and including the first <eot>."""
  return ~np.asarray(mdlm_sampler.after_first_eot(tokens_NT, eot_id))


def _logprob_fn(graphdef, objective: str, g, mask_id: int, schedule: str):
  """(params, batch, rng) -> per-token log-probs [N, T] of the completions."""

  def fn(params, batch, rng):
    model = nnx.merge(graphdef, params)
    args = (model, batch["context"], batch["valid"], batch["completion"])
    if objective == "ar":
      return logprob.ar_logprob(*args)
    if g.mdlm_logprob == "one_step":
      return logprob.mdlm_one_step_logprob(*args, rng, mask_id=mask_id,
                                           prompt_mask_rate=g.prompt_mask_rate)
    logp, _ = logprob.mdlm_coupled_logprob(*args, batch["mask"], rng, mask_id=mask_id,
                                           schedule=schedule)
    return logp

  return fn


def _update_fn(logprob_fn, tx, g):
  """(state, batch, rng) -> (state, metrics): one clipped policy-gradient step."""

  def fn(state, batch, rng):
    def loss_of(params):
      logp = logprob_fn(params, batch, rng)
      return grpo.grpo_loss(logp, batch["logp_old"], batch["logp_ref"], batch["advantages"],
                            batch["mask"], clip_eps=g.clip_eps, beta=g.beta,
                            kl_kind=g.kl_estimator)

    (loss, metrics), grads = jax.value_and_grad(loss_of, has_aux=True)(state["params"])
    new_state, health = trainer.apply_gradients(state, loss, grads, tx)
    return new_state, {**metrics, "loss": loss, **health}

  return fn


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


def evaluate_splits(wm: WorldModel, params, splits: Mapping[str, Sequence[ev.Example]],
                    cfg, step: int, workdir: str) -> dict:
  """Scores the current params on each eval split with the eval suite's metrics;
  writes WORKDIR/eval/<split>.step<N>.json and returns the headline means."""
  eval_cfg = ev.EvalConfig(num_samples=cfg.train.eval_samples, seed=cfg.seed,
                           max_rollouts=0, max_steered=0)
  overrides = cfg.sample.to_dict()
  predict = lambda trs, steers, g, seed: wm.texts(wm.sample_tokens(
      trs, num_samples=g, seed=seed, steers=list(steers), params=params, **overrides))
  out = {}
  os.makedirs(os.path.join(workdir, EVAL_DIR), exist_ok=True)
  for name, examples in splits.items():
    predictions = ev.predict_all(predict, [ex.transition for ex in examples],
                                 [None] * len(examples), eval_cfg, f"eval {name}")
    report = ev.evaluate(examples, predictions, cfg=eval_cfg)
    report["step"] = step
    ev.write_report(report, os.path.join(workdir, EVAL_DIR, f"{name}.step{step}.json"))
    out[name] = {k: report["overall"][k]["mean"] for k in EVAL_KEYS if k in report["overall"]}
  return out


def _meta(wm: WorldModel, cfg, init: str) -> dict:
  """Checkpoint meta: the world model's own config (so WorldModel.load works),
  with the optimizer GRPO used, plus the GRPO config and where it started."""
  model_cfg = copy.deepcopy(wm.cfg)
  with model_cfg.unlocked():
    model_cfg.optim = cfg.optim
    model_cfg.train.steps = cfg.train.steps
  return {"config": model_cfg.to_dict(), "tokenizer": trainer.TOKENIZER_FILE,
          "model": dataclasses.asdict(config_lib.model_config(wm.cfg, wm.tokenizer.vocab_size)),
          "seed": cfg.seed, "grpo": cfg.to_dict(), "init": os.path.abspath(init)}


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

  # --- state: params being trained, a frozen copy as the KL reference
  tx, lr_schedule = trainer.make_optimizer(cfg)
  with jax.set_mesh(mesh):
    state = trainer.init_train_state(wm.params, tx)
    ref_params = jax.tree.map(jnp.copy, wm.params)
  state_sh = jax.tree.map(lambda x: x.sharding, state)
  # Inputs arrive committed to their shardings (params at creation, rollout
  # arrays by `shard_batch`), so jit takes them as they are.
  shard_batch = lambda host: {k: jax.device_put(v, sharding.batch_sharding(mesh, v.ndim))
                              for k, v in host.items()}
  lp_fn = _logprob_fn(wm.graphdef, wm.objective, g, tok.mask_id, wm.cfg.diffusion.schedule)
  logprob_jit = jax.jit(lp_fn, out_shardings=sharding.batch_sharding(mesh))
  update_jit = jax.jit(_update_fn(lp_fn, tx, g),
                       out_shardings=(state_sh, sharding.replicated(mesh)), donate_argnums=(0,))

  ckpt = Checkpointer(os.path.join(workdir, trainer.CHECKPOINT_DIR), cfg.train.checkpoint_every,
                      cfg.train.keep_checkpoints)
  meta = _meta(wm, cfg, cfg.init)
  start = ckpt.latest_step()
  if start is not None:
    state, _ = ckpt.restore(start, trainer.abstract_like(state))
    print(f"resumed from step {start}", flush=True)
  else:
    os.makedirs(workdir, exist_ok=True)
    tok.save(os.path.join(workdir, trainer.TOKENIZER_FILE))
  start = start or 0
  writer = MetricsWriter(workdir, resume_step=start or None, tensorboard=cfg.train.tensorboard)
  print(f"GRPO on a {wm.objective} world model ({wm.num_params:,} params), B x G = {B} x {G}, "
        f"mu {g.mu}, {len(train_examples)} training transitions, eval splits "
        f"{ {k: len(v) for k, v in eval_splits.items()} }", flush=True)

  evals = {}

  def run_eval(step: int) -> None:
    if not eval_splits:
      return
    for name, means in evaluate_splits(wm, state["params"], eval_splits, cfg, step,
                                       workdir).items():
      evals[name] = {"step": step, **means}
      writer.write(step, {f"eval/{name}/{k}": v for k, v in means.items()})
      print(f"eval {name} @ step {step}: " + " ".join(f"{k} {v:.3f}" for k, v in means.items()),
            flush=True)

  if start == 0:
    run_eval(0)
  total = cfg.train.steps
  stop_at = min(total, start + max_steps) if max_steps is not None else total
  progress = StepProgress(total, start, keys=PROGRESS_KEYS)
  base_key = jax.random.key(cfg.seed)
  metrics: dict = {}
  preempted = False
  step = start
  with trainer.Preemption() as preemption:
    for step in range(start + 1, stop_at + 1):
      # One key per step: old, new and reference log-probs see the same masks.
      key = jax.random.fold_in(base_key, step)
      metrics = _grpo_step(step, cfg, wm, state_params=state["params"], ref_params=ref_params,
                           examples=train_examples, reward_of=reward_of,
                           logprob_jit=logprob_jit, shard_batch=shard_batch, key=key)
      batch = metrics.pop("batch")
      t0 = time.perf_counter()
      for _ in range(g.mu):
        state, dev = update_jit(state, batch, key)
      dev = {k: float(v) for k, v in jax.device_get(dev).items()}
      metrics["time_update"] = time.perf_counter() - t0
      if not dev.pop("finite"):
        logging.warning("step %d: non-finite GRPO loss; the update was skipped", step)
        metrics["skipped"] = 1.0
      metrics.update(dev)
      metrics["rollouts_per_sec"] = B * G / (metrics["time_sample"] + metrics["time_score"]
                                             + metrics["time_logprob"] + metrics["time_update"])
      metrics["learning_rate"] = float(lr_schedule(step - 1))
      if step % cfg.train.log_every == 0 or step == stop_at:
        writer.write(step, metrics)
      progress.update(step, metrics)
      if step % cfg.train.eval_every == 0 or step == total:
        run_eval(step)
      if ckpt.should_save(step) or preemption.requested or step == stop_at:
        ckpt.save(step, state, None, meta, force=True)
      if preemption.requested:
        print(f"SIGTERM: saved a checkpoint at step {step}; exiting", flush=True)
        preempted = True
        break
  ckpt.close()
  writer.close()
  return GRPOResult(step=step, metrics=metrics, evals=evals, preempted=preempted)


def _grpo_step(step: int, cfg, wm: WorldModel, *, state_params, ref_params, examples,
               reward_of, logprob_jit, shard_batch, key) -> dict:
  """Rollouts, host scoring, advantages and old/ref log-probs of one step.

  Returns the step's metrics with the update batch under "batch".
  """
  g = cfg.grpo
  B, G = g.num_prompts, g.num_generations
  chosen = [examples[i] for i in
            np.random.default_rng([cfg.seed, step]).choice(len(examples), B, replace=False)]
  t0 = time.perf_counter()
  samples = wm.sample_tokens([ex.transition for ex in chosen], num_samples=G,
                             seed=cfg.seed * 1_000_003 + step, params=state_params,
                             **cfg.sample.to_dict())
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
          "mask": completion_mask(completion, wm.tokenizer.eot_id),
          "advantages": advantages.reshape(N).astype(np.float32)}
  batch = shard_batch(host)
  batch["logp_old"] = logprob_jit(state_params, batch, key)
  batch["logp_ref"] = logprob_jit(ref_params, batch, key)
  mask = host["mask"]
  # Entropy proxy: the mean NLL of the sampled tokens under the sampling policy.
  entropy = float(-np.sum(np.asarray(batch["logp_old"]) * mask) / max(mask.sum(), 1))
  t3 = time.perf_counter()
  return {
      "batch": batch,
      "reward_mean": float(rewards_BG.mean()),
      "reward_std": float(rewards_BG.std()),
      "pass_rate": float(np.mean(checks.rewards == 1.0)),
      "zero_spread": grpo.zero_spread_fraction(rewards_BG),
      "reward_failures": float(len(scored.failures)),
      "entropy": entropy,
      "completion_tokens": float(mask.sum(axis=1).mean()),
      "time_sample": t1 - t0, "time_score": t2 - t1, "time_logprob": t3 - t2,
  }
