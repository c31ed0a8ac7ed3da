"""KV-cache autoregressive decoding for the AR baseline (a `causal` backbone).

The context is left-padded, so its last real token (the <target> marker) sits
in column C-1 of every row. Prefill encodes columns 0..C-2 once per call (on
B rows, then shared by the G samples); decode step j feeds one token at
position C-1+j (step 0: the marker, step j > 0: target token j-1), whose
logits give target token j. Its keys/values go into a fixed-size cache with
`lax.dynamic_update_slice`, so every step has the same shapes and the loop is
one `lax.scan`. Positions follow `encode_context` (column index); with RoPE
only differences matter, so left padding does not change the output.

Pins (`fixed_BT >= 0`) are teacher-forced: the decoder emits the pinned token
and feeds it back, so the AR model sees pins only to its left, which is the
point of comparing it with infilling.

Stop handling: once <eot> has been emitted (sampled or pinned) every later
free position emits <eot> too. Training has no loss after the first <eot>
(no fill), so nothing the model would predict there means anything; readers
take the text before the first <eot> (`Tokenizer.decode_target`, GRPO's
`completion_mask`), for both baselines alike.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
from flax import nnx

from mdlm_wm.model.sampling import check_draw_settings, fold_in, row_keys, sample_tokens


@dataclasses.dataclass(frozen=True)
class DecodeConfig:
  max_len: int  # target tokens generated (T)
  temperature: float = 1.0  # 0: greedy
  top_p: float = 1.0  # 1: no nucleus filtering
  eot_id: int | None = None  # None: no stop handling

  def validate(self) -> None:
    if self.max_len < 1:
      raise ValueError(f"max_len: must be >= 1, got {self.max_len}")
    check_draw_settings(self.temperature, self.top_p)


@functools.partial(jax.jit, static_argnames=("graphdef", "cfg", "num_samples"))
def _decode_jit(graphdef, params, context_BC, context_valid_BC, rng, fixed_BT, *,
                cfg: DecodeConfig, num_samples: int):
  model = nnx.merge(graphdef, params)
  if model.cfg.attention != "causal":
    raise ValueError(f"AR decoding needs attention='causal', got {model.cfg.attention!r}")
  B, C = context_BC.shape
  T, G = cfg.max_len, num_samples
  N, P = B * G, C - 1  # rows, prefilled cache length
  rep = lambda x: jnp.repeat(x, G, axis=0)
  rng = rng if rng.ndim == 0 else row_keys(rng, G)

  prefix = model.encode_context(context_BC[:, :P], context_valid_BC[:, :P])
  grow = lambda x: rep(jnp.pad(x, ((0, 0), (0, T)) + ((0, 0),) * (x.ndim - 2)))
  cache0 = [(grow(k), grow(v)) for k, v in prefix]
  prefix_valid_NK = jnp.pad(rep(context_valid_BC[:, :P]), ((0, 0), (0, T)))
  fixed_NT = rep(fixed_BT)
  slot_K = jnp.arange(P + T)

  def step(carry, j):
    cache, token_N, done_N = carry
    position = P + j
    # Valid context, the tokens fed at steps < j, and (appended by the block) itself.
    key_mask = prefix_valid_NK | ((slot_K >= P) & (slot_K < position))[None, :]
    key_mask = jnp.concatenate([key_mask, jnp.ones((N, 1), bool)], axis=1)[:, None, :]
    x = model.embed(token_N[:, None])
    positions = jnp.full((N, 1), position)
    new_cache = []
    for block, (k_cache, v_cache) in zip(model.blocks, cache):
      x, (k, v) = block(x, positions, key_mask, (k_cache, v_cache))
      new_cache.append((jax.lax.dynamic_update_slice_in_dim(k_cache, k, position, axis=1),
                        jax.lax.dynamic_update_slice_in_dim(v_cache, v, position, axis=1)))
    logits = model.logits(x)[:, 0]
    token = sample_tokens(fold_in(rng, j), logits, cfg.temperature, cfg.top_p)
    if cfg.eot_id is not None:
      token = jnp.where(done_N, cfg.eot_id, token)
    pin = fixed_NT[:, j]
    token = jnp.where(pin >= 0, pin, token)
    if cfg.eot_id is not None:
      done_N = done_N | (token == cfg.eot_id)
    return (new_cache, token, done_N), token

  init = (cache0, rep(context_BC[:, P]), jnp.zeros((N,), bool))
  _, tokens_TN = jax.lax.scan(step, init, jnp.arange(T))
  return tokens_TN.T.reshape(B, G, T)


def decode(graphdef, params, context_BC, context_valid_BC, rng, cfg: DecodeConfig, *,
           num_samples: int, fixed_BT=None):
  """Generates `cfg.max_len` target tokens per sample: int32 [B, G, T].

  `rng` is one key or [B] keys (one per prompt: sample g of prompt b then
  draws from fold_in(key_b, g) alone); `context_BC` is left-padded and its
  last column must be a real token (the <target> marker); `fixed_BT` pins
  tokens (-1 = free) that are teacher-forced.
  Compiled once per (graphdef, cfg, num_samples, shapes).
  """
  cfg.validate()
  context_BC = jnp.asarray(context_BC, jnp.int32)
  B = context_BC.shape[0]
  if fixed_BT is None:
    fixed_BT = jnp.full((B, cfg.max_len), -1, jnp.int32)
  if tuple(fixed_BT.shape) != (B, cfg.max_len):
    raise ValueError(f"fixed_BT has shape {tuple(fixed_BT.shape)}; expected {(B, cfg.max_len)}")
  return _decode_jit(graphdef, params, context_BC, jnp.asarray(context_valid_BC, bool), rng,
                     jnp.asarray(fixed_BT, jnp.int32), cfg=cfg, num_samples=num_samples)
