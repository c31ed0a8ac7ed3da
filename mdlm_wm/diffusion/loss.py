"""The MDLM objective (continuous-time ELBO, SUBS parameterization).

Per example a time t is drawn (antithetic across the batch), each loss-
eligible token is replaced by [MASK] with probability 1 - alpha(t), and the
model's cross-entropy on the masked tokens is weighted by the ELBO weight.
SUBS: the [MASK] logit is never predicted (-inf), and unmasked tokens carry
over unchanged, so they contribute no loss. The reported loss is the ELBO in
nats per eligible token.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from mdlm_wm.diffusion import schedule

_GOLDEN = 0.6180339887498949


def antithetic_times(rng, segment_ids_BL, block_BL=None, t_min: float = 1e-3,
                     t_max: float = 1.0):
  """A time per example (row, segment), or per (example, block) with
  `block_BL`, low-discrepancy over the batch: [B, L].

  Rows are stratified (row b starts at u + b/B); the segments of a row are
  spread by the golden ratio and the blocks of an example by its square, so
  every batch covers [t_min, t_max] evenly.
  """
  B, _ = segment_ids_BL.shape
  u = jax.random.uniform(rng, ())
  t = u + jnp.arange(B)[:, None] / B + segment_ids_BL * _GOLDEN
  if block_BL is not None:
    t = t + block_BL * _GOLDEN ** 2
  return t_min + (t_max - t_min) * jnp.mod(t, 1.0)


def subs_log_probs(logits_BLV, mask_id: int):
  """Log-probabilities with the [MASK] class removed (SUBS)."""
  logits = logits_BLV.astype(jnp.float32).at[..., mask_id].set(-jnp.inf)
  return jax.nn.log_softmax(logits, axis=-1)


def apply_mask(rng, tokens_BL, eligible_BL, t_BL, mask_id: int, kind: str):
  """Masks each eligible token with probability 1 - alpha(t); returns (noisy, is_masked)."""
  p_mask = 1.0 - schedule.alpha(t_BL, kind)
  is_masked = eligible_BL & (jax.random.uniform(rng, tokens_BL.shape) < p_mask)
  return jnp.where(is_masked, mask_id, tokens_BL), is_masked


def mdlm_loss(logits_BLV, tokens_BL, is_masked_BL, eligible_BL, t_BL, mask_id: int,
              kind: str = "loglinear"):
  """ELBO in nats per eligible token, and the plain masked-token cross-entropy.

  Returns (elbo, metrics) where metrics has `masked_ce` (mean CE over masked
  tokens, unweighted: comparable across schedules) and `masked_fraction`.
  """
  logp = subs_log_probs(logits_BLV, mask_id)
  nll = -jnp.take_along_axis(logp, tokens_BL[..., None], axis=-1)[..., 0]
  masked = is_masked_BL.astype(jnp.float32)
  n_eligible = jnp.maximum(eligible_BL.sum(), 1)
  weight = schedule.elbo_weight(t_BL, kind)
  elbo = jnp.sum(nll * masked * weight) / n_eligible
  n_masked = jnp.maximum(masked.sum(), 1.0)
  return elbo, {"masked_ce": jnp.sum(nll * masked) / n_masked,
                "masked_fraction": masked.sum() / n_eligible}
