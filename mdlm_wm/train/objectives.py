"""Batch -> scalar loss for each objective, on packed rows from the pipeline.

Every loss is in nats per target token up to and including the first <eot>
(there is no fill), so MDLM and AR numbers are comparable.

MDLM: the block-diffusion objective of `diffusion/block.py` (b = 1 with the
logit shift is exactly the AR loss; b >= the target length is the
full-canvas MDLM). One time t per (example, block), low-discrepancy over the
batch; SUBS; the schedule's ELBO weight. A `steer_drop_rate` fraction of
examples hides its steer tokens from attention (segment id 0, positions
unchanged), which is exactly how a sampler's unconditional pass for
classifier-free guidance sees the context. With `clean_ar_weight` > 0 the
optimizer's loss adds that weight times the AR's next-token loss on the
block row's (then causal) clean copy; the reported `loss` stays the ELBO
and the next-token loss is `clean_ar`.

AR: the same backbone with a causal mask and next-token cross-entropy on the
target.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from mdlm_wm import config as config_lib
from mdlm_wm.ar.loss import ar_loss
from mdlm_wm.data import block_rows
from mdlm_wm.diffusion import block as block_lib
from mdlm_wm.diffusion import loss as mdlm
from mdlm_wm.diffusion import schedule


@dataclasses.dataclass(frozen=True)
class ObjectiveConfig:
  """The loss settings; their defaults are the config's (`objective_config`)."""
  objective: str
  mask_id: int
  schedule: str
  steer_drop_rate: float
  shift: bool  # MDLM: block rows built with the logit shift
  # MDLM training times t ~ U[t_min, t_max] (BD3-LM's clipped schedule: small
  # blocks' ELBO gradients are dominated by rare, heavily weighted draws near
  # t = 0); evaluation always uses the full range, so valid_loss is the ELBO.
  t_min: float
  t_max: float
  # Training steps over which in-block attention opens from causal to
  # bidirectional (diffusion/block.py); 0: bidirectional from the start.
  anneal_steps: int = 0
  # > 0: the clean copy is causal in its block and adds a next-token loss.
  clean_ar_weight: float = 0.0


def objective_config(cfg, mask_id: int) -> ObjectiveConfig:
  """The objective of an experiment config (mdlm_wm/config.py). Configs from
  before the logit shift and the clipped times train as they did: no shift,
  the full time range."""
  return ObjectiveConfig(objective=cfg.objective, mask_id=mask_id,
                         schedule=cfg.diffusion.schedule,
                         steer_drop_rate=cfg.diffusion.steer_drop_rate,
                         shift=bool(cfg.diffusion.get("shift", False)),
                         t_min=cfg.diffusion.get("t_min", 1e-3),
                         t_max=cfg.diffusion.get("t_max", 1.0),
                         anneal_steps=cfg.diffusion.get("anneal_steps", 0),
                         # The pipeline's clean labels and the sampler's cache follow
                         # the same rule (config.causal_clean).
                         clean_ar_weight=(cfg.diffusion.clean_ar_weight
                                          if config_lib.causal_clean(cfg) else 0.0))


def _per_example(u_BL, segment_ids_BL):
  """Broadcasts one draw per (row, segment) to every token of that segment."""
  return jnp.take_along_axis(u_BL, segment_ids_BL, axis=1)


def loss_fn(model, batch, rng, cfg: ObjectiveConfig, train: bool = True, step=None):
  """Returns (loss in nats per target token, metrics dict); `step` (the
  optimizer step, traced) drives attention annealing while training."""
  seg = batch["segment_ids"]
  k_drop, k_t, k_mask = jax.random.split(rng, 3)
  if train and cfg.steer_drop_rate > 0:
    drop = _per_example(jax.random.uniform(k_drop, seg.shape), seg) < cfg.steer_drop_rate
    seg = jnp.where(drop & (batch["steer_mask"] > 0), 0, seg)
  if cfg.objective == "ar":
    logits = model(batch["tokens"], batch["positions"], seg, batch["target_mask"])
    loss = ar_loss(logits, batch["tokens"], batch["target_mask"], seg)
    return loss, {"loss": loss}
  return block_loss(model, batch, seg, k_t, k_mask, cfg, train, step)


def anneal_ratio(step, anneal_steps: int):
  """The share of in-block future keys attended at `step`: 0 -> 1 linearly."""
  return jnp.clip(jnp.asarray(step, jnp.float32) / anneal_steps, 0.0, 1.0)


def block_loss(model, batch, seg, k_t, k_mask, cfg: ObjectiveConfig, train: bool = True,
               step=None):
  """The block-diffusion ELBO of packed block rows (diffusion/block.py)."""
  tokens, labels, blk = batch["tokens"], batch["labels"], batch["block"]
  is_label = (batch["role"] == block_rows.NOISY) & (seg > 0)
  t_range = (cfg.t_min, cfg.t_max) if train else (1e-3, 1.0)
  t = mdlm.antithetic_times(k_t, seg, blk, *t_range)
  p_mask = 1.0 - schedule.alpha(t, cfg.schedule)
  label_masked = is_label & (jax.random.uniform(k_mask, tokens.shape) < p_mask)
  # With the shift, slot j holds label j - 1: the slot to its left in the row.
  holds_masked = jnp.roll(label_masked, 1, axis=1) if cfg.shift else label_masked
  noisy = jnp.where((batch["maskable"] > 0) & holds_masked, cfg.mask_id, tokens)
  future_keep = None
  if train and cfg.anneal_steps > 0:
    if step is None:
      raise ValueError("diffusion.anneal_steps: the training loss needs the step")
    k_attn = jax.random.fold_in(k_mask, 1)  # a new stream; k_mask's draws unchanged
    future_keep = (jax.random.uniform(k_attn, seg.shape + seg.shape[-1:])
                   < anneal_ratio(step, cfg.anneal_steps))
  mask = block_lib.block_attention_mask(seg, batch["role"], blk, batch["positions"],
                                        causal_context=cfg.shift, future_keep_BLL=future_keep,
                                        causal_clean=cfg.clean_ar_weight > 0)
  logits = model(noisy, batch["positions"], seg, None, mask)
  logp = mdlm.subs_log_probs(logits, cfg.mask_id)
  nll = -jnp.take_along_axis(logp, labels[..., None], axis=-1)[..., 0]
  # A block's last label is never an input of its block (with the shift): it
  # is counted always, with its expected ELBO weight of 1.
  always = is_label & (batch["last"] > 0) if cfg.shift else jnp.zeros_like(is_label)
  weight = jnp.where(always, 1.0, schedule.elbo_weight(t, cfg.schedule))
  counted = (label_masked | always).astype(jnp.float32)
  n_labels = jnp.maximum(is_label.sum(), 1)
  elbo = jnp.sum(nll * counted * weight) / n_labels
  n_counted = jnp.maximum(counted.sum(), 1.0)
  metrics = {"loss": elbo, "masked_ce": jnp.sum(nll * counted) / n_counted,
             "masked_fraction": label_masked.sum() / n_labels}
  if cfg.clean_ar_weight <= 0:
    return elbo, metrics
  is_clean = (batch["role"] == block_rows.CLEAN) & (seg > 0)
  clean_nll = jnp.sum(nll * is_clean) / jnp.maximum(is_clean.sum(), 1)
  return elbo + cfg.clean_ar_weight * clean_nll, {**metrics, "clean_ar": clean_nll}
