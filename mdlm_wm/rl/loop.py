"""The GRPO machinery shared by world-model GRPO (rl/wm_grpo.py) and agent
GRPO (agents/grpo.py).

The two differ in how a step's rollouts are collected and scored and in what
an evaluation is; everything else lives here:

  * `Learner`: the params being trained (a trainer train state), the frozen
    reference and the jitted log-prob and update functions;
  * `Learner.prepare`: old and reference log-probs of a batch of sampled
    completions under one key, so MDLM estimators mask alike for both;
  * `Learner.apply`: `mu` clipped policy-gradient updates with a KL penalty;
  * `run_loop`: resume from the workdir's checkpoint or start fresh, then per
    step collect -> update -> metrics -> eval -> checkpoint, saving and
    stopping on SIGTERM; a step whose advantages are all 0 makes no update
    (logged as `no_signal`).

A batch holds completions after left-padded contexts, in the sampler's
layout: `context` [N, C], `valid` [N, C], `completion` [N, T], `mask` [N, T]
(the tokens that count) and `advantages` [N]; `prepare` adds `logp_old` and
`logp_ref`.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from absl import logging
from flax import nnx

from mdlm_wm import config as config_lib
from mdlm_wm.data.tokenizer import Tokenizer
from mdlm_wm.model import sharding
from mdlm_wm.model.sampling import after_first_eot
from mdlm_wm.rl import grpo, logprob
from mdlm_wm.train import state as train_state
from mdlm_wm.train import trainer
from mdlm_wm.train.checkpoint import Checkpointer
from mdlm_wm.train.metrics import MetricsWriter, StepProgress


def completion_mask(tokens_NT: np.ndarray, eot_id: int) -> np.ndarray:
  """Canvas positions that make the text: up to and including the first <eot>."""
  return ~np.asarray(after_first_eot(tokens_NT, eot_id))


def logprob_fn(graphdef, objective: str, g, mask_id: int, schedule: str,
               block: tuple[int, bool, bool] | None = None):
  """(params, batch, rng) -> per-token log-probs [N, T] of the completions:
  exact for AR, the configured estimator (`g.mdlm_logprob`) for MDLM; for a
  block-diffusion MDLM (`block` = WorldModel.block: block size, shift,
  causal clean copy) the coupled estimate
  in its training layout."""
  if block is not None and g.mdlm_logprob != "coupled":
    raise ValueError(f"config.grpo.mdlm_logprob: {g.mdlm_logprob!r} is not defined for a "
                     "block-diffusion world model; use coupled")

  def fn(params, batch, rng):
    model = nnx.merge(graphdef, params)
    args = (model, batch["context"], batch["valid"], batch["completion"])
    if objective == "ar":
      return logprob.ar_logprob(*args)
    if block is not None:
      logp, _ = logprob.block_coupled_logprob(*args, batch["mask"], rng, mask_id=mask_id,
                                              block_size=block[0], shift=block[1],
                                              causal_clean=block[2], schedule=schedule)
      return logp
    if g.mdlm_logprob == "one_step":
      return logprob.mdlm_one_step_logprob(*args, rng, mask_id=mask_id,
                                           prompt_mask_rate=g.prompt_mask_rate)
    logp, _ = logprob.mdlm_coupled_logprob(*args, batch["mask"], rng, mask_id=mask_id,
                                           schedule=schedule)
    return logp

  return fn


def update_fn(logprob_fn_, tx, g):
  """(state, batch, rng) -> (state, metrics): one clipped policy-gradient step."""

  def fn(state, batch, rng):
    def loss_of(params):
      logp = logprob_fn_(params, batch, rng)
      return grpo.grpo_loss(logp, batch["logp_old"], batch["logp_ref"], batch["advantages"],
                            batch["mask"], clip_eps=g.clip_eps, beta=g.beta,
                            kl_kind=g.kl_estimator)

    (loss, metrics), grads = jax.value_and_grad(loss_of, has_aux=True)(state["params"])
    new_state, health = trainer.apply_gradients(state, loss, grads, tx)
    return new_state, {**metrics, "loss": loss, **health}

  return fn


@dataclasses.dataclass
class Learner:
  """A policy under GRPO: train state, frozen reference, jitted steps."""
  state: dict
  ref_params: Any
  logprob: Callable  # jitted (params, batch, rng) -> [N, T]
  update: Callable  # jitted (state, batch, rng) -> (state, metrics); donates state
  lr_schedule: Callable
  mesh: Any

  def shard(self, host: dict[str, np.ndarray]) -> dict[str, jax.Array]:
    """Host arrays committed to the batch sharding, so jit takes them as they are."""
    return {k: jax.device_put(v, sharding.batch_sharding(self.mesh, v.ndim))
            for k, v in host.items()}

  def prepare(self, host: dict[str, np.ndarray], key) -> tuple[dict, float]:
    """The update batch (old and reference log-probs added) and an entropy
    proxy: the mean NLL of the sampled tokens under the sampling policy."""
    batch = self.shard(host)
    batch["logp_old"] = self.logprob(self.state["params"], batch, key)
    batch["logp_ref"] = self.logprob(self.ref_params, batch, key)
    mask = host["mask"]
    entropy = float(-np.sum(np.asarray(batch["logp_old"]) * mask) / max(mask.sum(), 1))
    return batch, entropy

  def apply(self, batch: dict, key, mu: int) -> dict:
    """`mu` updates on one batch; returns the last one's metrics (floats, with
    `finite`) and `time_update`."""
    t0 = time.perf_counter()
    for _ in range(mu):
      self.state, dev = self.update(self.state, batch, key)
    metrics = {k: float(v) for k, v in jax.device_get(dev).items()}
    metrics["time_update"] = time.perf_counter() - t0
    return metrics


def make_learner(params, cfg, mesh, logprob_fn_: Callable) -> Learner:
  """A learner starting at `params`, which are also the frozen KL reference;
  the optimizer is `cfg.optim` over `cfg.train.steps`, the loss `cfg.grpo`'s."""
  tx, lr_schedule = train_state.make_optimizer(cfg)
  with jax.set_mesh(mesh):
    state = train_state.init_train_state(params, tx)
    ref_params = jax.tree.map(jnp.copy, params)
  state_sh = jax.tree.map(lambda x: x.sharding, state)
  return Learner(
      state=state, ref_params=ref_params,
      logprob=jax.jit(logprob_fn_, out_shardings=sharding.batch_sharding(mesh)),
      update=jax.jit(update_fn(logprob_fn_, tx, cfg.grpo),
                     out_shardings=(state_sh, sharding.replicated(mesh)), donate_argnums=(0,)),
      lr_schedule=lr_schedule, mesh=mesh)


def checkpoint_meta(model_cfg, vocab_size: int, cfg, init: str) -> dict:
  """Checkpoint meta: the trained model's own config (so WorldModel.load reads
  the workdir) with the optimizer GRPO used, plus the GRPO config and where
  it started."""
  model_cfg = copy.deepcopy(model_cfg)
  with model_cfg.unlocked():
    model_cfg.optim = cfg.optim
    model_cfg.train.steps = cfg.train.steps
  return {"config": model_cfg.to_dict(), "tokenizer": train_state.TOKENIZER_FILE,
          "model": dataclasses.asdict(config_lib.model_config(model_cfg, vocab_size)),
          "seed": cfg.seed, "grpo": cfg.to_dict(), "init": os.path.abspath(init)}


@dataclasses.dataclass
class LoopResult:
  step: int
  metrics: dict  # the last step's; empty when no step ran
  preempted: bool = False
  steps_run: int = 0  # 0: the workdir was already at cfg.train.steps


Collect = Callable[[int, Any, Any], tuple[dict, dict]]
Evaluate = Callable[[int, Any], dict]
# Evaluation metrics are logged under this prefix; a resumed run looks for it.
EVAL_PREFIX = "eval/"


def run_loop(cfg, workdir: str, learner: Learner, *, tokenizer: Tokenizer, meta: dict,
             collect: Collect, evaluate: Evaluate | None, rollouts_per_step: int,
             rate_key: str, progress_keys: Sequence[str],
             max_steps: int | None = None) -> LoopResult:
  """Runs (or resumes) GRPO steps 1..cfg.train.steps in `workdir`.

  `collect(step, params, key)` samples and scores a step's rollouts with the
  current params and returns (metrics, batch) with the batch prepared
  (`Learner.prepare`); every `time_*` metric counts towards `rate_key`
  (rollouts_per_step / seconds). `evaluate(step, params)` returns metrics
  to log (as `eval/<key>`); it runs at step 0 of a fresh run (unless
  train.eval_at_start is False), every train.eval_every steps and at the
  end, after that step's checkpoint is saved, so a crash or preemption
  during a long evaluation loses no training: the rerun restores the step
  and evaluates it if metrics.jsonl holds no `eval/` key for it. One key per
  step, fold_in(seed, step), serves collection and every update, so a
  resumed run draws what the uninterrupted one would.
  `max_steps` stops after that many steps of this call.
  """
  ckpt = Checkpointer(os.path.join(workdir, train_state.CHECKPOINT_DIR), cfg.train.checkpoint_every,
                      cfg.train.keep_checkpoints)
  start = ckpt.latest_step()
  if start is not None:
    learner.state, _ = ckpt.restore(start, train_state.abstract_like(learner.state))
    print(f"resumed from step {start}", flush=True)
  else:
    os.makedirs(workdir, exist_ok=True)
    tokenizer.save(os.path.join(workdir, train_state.TOKENIZER_FILE))
  start = start or 0
  writer = MetricsWriter(workdir, resume_step=start or None, tensorboard=cfg.train.tensorboard)

  def run_eval(step: int) -> None:
    logged = evaluate(step, learner.state["params"]) if evaluate is not None else {}
    if logged:
      writer.write(step, {f"{EVAL_PREFIX}{k}": v for k, v in logged.items()})

  total = cfg.train.steps

  def eval_due(step: int) -> bool:
    return step % cfg.train.eval_every == 0 or step == total

  stop_at = min(total, start + max_steps) if max_steps is not None else total
  progress = StepProgress(total, start, keys=progress_keys)
  base_key = jax.random.key(cfg.seed)
  metrics: dict = {}
  preempted = False
  step = start
  # finally: an exception (an evaluation that crashes, say) still waits for the
  # checkpoint in flight, so the rerun resumes from the last finished step.
  try:
    if (eval_due(start) and (start or cfg.train.eval_at_start)
        and not any(k.startswith(EVAL_PREFIX) for k in writer.logged_keys(start))):
      run_eval(start)
    with trainer.Preemption() as preemption:
      for step in range(start + 1, stop_at + 1):
        key = jax.random.fold_in(base_key, step)
        metrics, batch = collect(step, learner.state["params"], key)
        if np.any(np.asarray(jax.device_get(batch["advantages"])) != 0):
          metrics.update(learner.apply(batch, key, cfg.grpo.mu))
          if not metrics.pop("finite"):
            logging.warning("step %d: non-finite GRPO loss; the update was skipped", step)
            metrics["skipped"] = 1.0
        else:
          # Every group had zero spread: the loss would carry only the KL term, and
          # Adam's momentum would keep moving the policy without any reward signal.
          metrics["no_signal"] = 1.0
        metrics[rate_key] = rollouts_per_step / sum(v for k, v in metrics.items()
                                                    if k.startswith("time_"))
        metrics["learning_rate"] = float(learner.lr_schedule(step - 1))
        if step % cfg.train.log_every == 0 or step == stop_at:
          writer.write(step, metrics)
        progress.update(step, metrics)
        # reached(), not requested: under jax.distributed every process must stop at one step.
        preempt = preemption.reached(step)
        if ckpt.should_save(step) or preempt or step == stop_at or eval_due(step):
          ckpt.save(step, learner.state, None, meta, force=True)
        if preempt:  # a due evaluation runs on resume, not inside the grace period
          print(f"SIGTERM: saved a checkpoint at step {step}; exiting", flush=True)
          preempted = True
          break
        if eval_due(step):
          run_eval(step)
  finally:
    ckpt.close()
    writer.close()
  return LoopResult(step=step, metrics=metrics, preempted=preempted, steps_run=step - start)
