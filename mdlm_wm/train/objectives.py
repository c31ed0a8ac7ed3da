"""Batch -> scalar loss for each objective, on packed rows from the pipeline.

MDLM: conditional training masks target tokens only; a `joint_mask_rate`
fraction of examples instead masks any content token (context included, never
markers or padding), so the model can infill anchors. A `steer_drop_rate`
fraction of examples hides its steer tokens from attention (segment id 0,
positions unchanged), which is exactly how the sampler's unconditional pass for
classifier-free guidance sees the context.

AR: the same backbone with a causal mask and next-token cross-entropy on the
target span.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from mdlm_wm.ar.loss import ar_loss
from mdlm_wm.diffusion import loss as mdlm

OBJECTIVES = ("mdlm", "ar")


@dataclasses.dataclass(frozen=True)
class ObjectiveConfig:
  objective: str
  mask_id: int
  special_ids: tuple[int, ...]  # never masked under joint masking
  schedule: str = "loglinear"
  joint_mask_rate: float = 0.1
  steer_drop_rate: float = 0.1


def _per_example(u_BL, segment_ids_BL):
  """Broadcasts one draw per (row, segment) to every token of that segment."""
  return jnp.take_along_axis(u_BL, segment_ids_BL, axis=1)


def loss_fn(model, batch, rng, cfg: ObjectiveConfig, train: bool = True):
  """Returns (loss in nats/token, metrics dict)."""
  tokens, seg = batch["tokens"], batch["segment_ids"]
  target = batch["target_mask"] > 0
  positions = batch["positions"]
  k_drop, k_joint, k_t, k_mask = jax.random.split(rng, 4)
  if train and cfg.steer_drop_rate > 0:
    drop = _per_example(jax.random.uniform(k_drop, seg.shape), seg) < cfg.steer_drop_rate
    seg = jnp.where(drop & (batch["steer_mask"] > 0), 0, seg)
  if cfg.objective == "ar":
    logits = model(tokens, positions, seg, batch["target_mask"])
    loss = ar_loss(logits, tokens, batch["target_mask"], seg)
    return loss, {"loss": loss}
  eligible = target & (seg > 0)
  joint = jnp.zeros_like(target)
  if train and cfg.joint_mask_rate > 0:
    joint = _per_example(jax.random.uniform(k_joint, seg.shape), seg) < cfg.joint_mask_rate
    content = (seg > 0) & ~jnp.isin(tokens, jnp.asarray(cfg.special_ids))
    eligible = eligible | (joint & content)
  t = mdlm.antithetic_times(k_t, seg)
  noisy, is_masked = mdlm.apply_mask(k_mask, tokens, eligible, t, cfg.mask_id, cfg.schedule)
  logits = model(noisy, positions, seg, batch["target_mask"])
  elbo, metrics = mdlm.mdlm_loss(logits, tokens, is_masked, eligible, t, cfg.mask_id,
                                 cfg.schedule)
  return elbo, {"loss": elbo, **metrics}
