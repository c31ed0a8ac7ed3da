"""Token sampling shared by both decoders: random keys per row, top-p, Gumbel-max, <eot>.

The MDLM samplers (`diffusion/sampler.py`, `diffusion/block_sampler.py`) and
the AR decoder (`ar/decode.py`) draw tokens with these functions, so both
baselines sample identically and neither objective imports the other.

Keys: one key for a whole call, or one key per prompt ([B] keys); with a key
per prompt, sample g of prompt b draws from fold_in(key_b, g) (`row_keys`),
so its randomness does not depend on which other prompts share the call.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def row_keys(keys_B, num_samples: int):
  """[B] per-prompt keys -> [B * G] per-sample keys: fold_in(key_b, g) for row b*G + g."""
  per_sample = lambda k: jax.vmap(lambda g: jax.random.fold_in(k, g))(jnp.arange(num_samples))
  return jax.vmap(per_sample)(keys_B).reshape(-1)


def fold_in(key, data):
  """`jax.random.fold_in` of one key, or of each key of a per-row [N] key array."""
  if key.ndim == 0:
    return jax.random.fold_in(key, data)
  return jax.vmap(jax.random.fold_in, in_axes=(0, None))(key, data)


def split(key, num: int = 2):
  """`jax.random.split` of one key ([num]), or of each per-row key ([num, N])."""
  if key.ndim == 0:
    return jax.random.split(key, num)
  return jax.vmap(lambda k: jax.random.split(k, num), out_axes=1)(key)


def draw(fn, key, shape):
  """fn(key, shape) with one key; with per-row keys ([N] = shape[0]), row n from key n."""
  if key.ndim == 0:
    return fn(key, shape)
  return jax.vmap(lambda k: fn(k, shape[1:]))(key)


def check_draw_settings(temperature: float, top_p: float) -> None:
  """ValueError unless `sample_tokens` can draw with these (every decoder's check)."""
  if temperature < 0:
    raise ValueError(f"temperature: must be >= 0, got {temperature}")
  if not 0.0 < top_p <= 1.0:
    raise ValueError(f"top_p: must be in (0, 1], got {top_p}")


def sample_tokens(key, logits_NV, temperature: float, top_p: float):
  """One token per row (leading axes any shape): argmax at temperature 0,
  else Gumbel-max in float32.

  `key` is one key or a key per row (`row_keys`). Gumbel-max, not an
  inverse-CDF draw (one uniform a row, about 5x cheaper here): the CDF sums
  every probability, so the float noise of a different batch (padding,
  reduction order) moves a draw about V times more often, and a prompt's
  samples must not depend on the rest of its batch
  (tests/test_gym_env.py failed with it).
  """
  logits = logits_NV.astype(jnp.float32)
  if temperature == 0:
    return jnp.argmax(logits, axis=-1).astype(jnp.int32)
  logits = logits / temperature
  if top_p < 1.0:
    logits = top_p_filter(logits, top_p)
  gumbel = draw(lambda k, shape: jax.random.gumbel(k, shape, jnp.float32), key, logits.shape)
  return jnp.argmax(logits + gumbel, axis=-1).astype(jnp.int32)


def top_p_filter(logits_NV, top_p: float):
  """Keeps the smallest set of most likely tokens whose mass reaches `top_p`.

  A token is kept when the mass strictly before it (in descending order) is
  below `top_p`, so the most likely token always survives.
  """
  sorted_NV = jnp.sort(logits_NV, axis=-1)[..., ::-1]
  probs = jax.nn.softmax(sorted_NV, axis=-1)
  mass_before = jnp.cumsum(probs, axis=-1) - probs
  n_keep = jnp.sum(mass_before < top_p, axis=-1, keepdims=True)
  cutoff = jnp.take_along_axis(sorted_NV, n_keep - 1, axis=-1)
  return jnp.where(logits_NV >= cutoff, logits_NV, -jnp.inf)


def after_first_eot(tokens, eot_id: int):
  """True at every position after the first `eot_id` (last axis): filler, not text."""
  is_eot = tokens == eot_id
  return (jnp.cumsum(is_eot, axis=-1) - is_eot) > 0
