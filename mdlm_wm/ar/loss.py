"""Next-token cross-entropy on the target span (the AR baseline's objective)."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def ar_loss(logits_BLV, tokens_BL, target_mask_BL, segment_ids_BL):
  """Mean NLL (nats/token) of each target token given everything before it.

  The logit at position i predicts token i + 1; a prediction counts when
  token i + 1 is a target token of the same example.
  """
  logp = jax.nn.log_softmax(logits_BLV[:, :-1].astype(jnp.float32), axis=-1)
  nxt = tokens_BL[:, 1:]
  nll = -jnp.take_along_axis(logp, nxt[..., None], axis=-1)[..., 0]
  valid = (target_mask_BL[:, 1:] > 0) & (segment_ids_BL[:, 1:] == segment_ids_BL[:, :-1])
  valid = valid.astype(jnp.float32)
  return jnp.sum(nll * valid) / jnp.maximum(valid.sum(), 1.0)
