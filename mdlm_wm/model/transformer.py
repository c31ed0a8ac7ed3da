"""One transformer backbone for both objectives: RMSNorm, RoPE, SwiGLU, GQA.

The attention mode is a config value, so the MDLM and the AR baseline differ
only in their mask and objective:
  * `bidirectional`: every token sees every token of its example;
  * `causal`: token i sees tokens <= i (the AR baseline);
  * `prefix`: context tokens see only context, target tokens see everything.
    Context keys/values then do not depend on the target, so a sampler can
    compute them once (`encode_context`) and reuse them for every denoising
    step and every sample (`decode_target`).
Packed rows carry `segment_ids` (0 = padding); attention never crosses
segments. Parameters carry mesh-axis sharding metadata resolved from logical
names with the config's rules.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import jax
import jax.numpy as jnp
from flax import nnx

from mdlm_wm.model import sharding

ATTENTION_MODES = ("bidirectional", "causal", "prefix")
_NEG_INF = -1e9  # finite: a fully masked row (padding) must not produce NaN


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  vocab_size: int
  d_model: int = 128
  n_layers: int = 2
  n_heads: int = 4
  n_kv_heads: int = 2
  d_ff: int = 384
  attention: str = "bidirectional"
  tie_embeddings: bool = True
  rope_base: float = 10_000.0
  dtype: str = "float32"  # compute dtype; params stay float32
  remat: bool = False

  @property
  def head_dim(self) -> int:
    return self.d_model // self.n_heads

  def validate(self) -> None:
    if self.attention not in ATTENTION_MODES:
      raise ValueError(f"attention must be one of {ATTENTION_MODES}, got {self.attention!r}")
    if self.d_model % self.n_heads:
      raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
    if self.n_heads % self.n_kv_heads:
      raise ValueError(f"n_heads ({self.n_heads}) must be a multiple of n_kv_heads "
                       f"({self.n_kv_heads})")
    if self.head_dim % 2:
      raise ValueError(f"head_dim ({self.head_dim}) must be even for RoPE")
    if self.dtype not in ("float32", "bfloat16"):
      raise ValueError(f"dtype must be float32 or bfloat16, got {self.dtype!r}")

  def num_params(self) -> int:
    d, f, v = self.d_model, self.d_ff, self.vocab_size
    kv = self.n_kv_heads * self.head_dim
    per_layer = d * d * 2 + 2 * d * kv + 3 * d * f + 2 * d
    return v * d * (1 if self.tie_embeddings else 2) + self.n_layers * per_layer + d

  def flops_per_token(self, seq_len: int) -> int:
    """Training FLOPs per token (forward + backward = 3x forward), incl. attention."""
    non_embed = self.num_params() - self.vocab_size * self.d_model * (
        1 if self.tie_embeddings else 2)
    matmul = 2 * (non_embed + self.vocab_size * self.d_model)
    attention = 2 * 2 * self.n_layers * seq_len * self.d_model
    return 3 * (matmul + attention)


def _init(init, names, rules):
  return nnx.with_partitioning(init, sharding.logical_to_mesh(names, rules))


class RMSNorm(nnx.Module):

  def __init__(self, dim: int, rules, eps: float = 1e-6):
    self.scale = nnx.Param(_init(nnx.initializers.ones, ("norm",), rules)(
        jax.random.key(0), (dim,), jnp.float32))
    self.eps = eps

  def __call__(self, x):
    x32 = x.astype(jnp.float32)
    y = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + self.eps)
    return (y * self.scale[...]).astype(x.dtype)


def rope(x_BLHD, positions_BL, base: float):
  """Rotary position embedding on the last axis (pairs of halves)."""
  half = x_BLHD.shape[-1] // 2
  freq = base ** (-jnp.arange(half, dtype=jnp.float32) / half)
  angle = positions_BL[..., None].astype(jnp.float32) * freq  # B L half
  sin, cos = jnp.sin(angle)[:, :, None, :], jnp.cos(angle)[:, :, None, :]
  x1, x2 = jnp.split(x_BLHD.astype(jnp.float32), 2, axis=-1)
  out = jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)
  return out.astype(x_BLHD.dtype)


class Attention(nnx.Module):

  def __init__(self, cfg: ModelConfig, rules, rngs: nnx.Rngs):
    d, hd = cfg.d_model, cfg.head_dim
    dtype = jnp.dtype(cfg.dtype)
    lin = lambda i, o, names: nnx.Linear(
        i, o, use_bias=False, dtype=dtype,
        kernel_init=_init(nnx.initializers.lecun_normal(), names, rules), rngs=rngs)
    self.q = lin(d, cfg.n_heads * hd, ("embed", "heads"))
    self.k = lin(d, cfg.n_kv_heads * hd, ("embed", "kv_heads"))
    self.v = lin(d, cfg.n_kv_heads * hd, ("embed", "kv_heads"))
    self.o = lin(cfg.n_heads * hd, d, ("heads", "embed"))
    self.cfg = cfg

  def kv(self, x_BLD, positions_BL):
    """Keys (with RoPE) and values of `x`: each [B, L, kv_heads, head_dim]."""
    B, L, _ = x_BLD.shape
    c = self.cfg
    k = rope(self.k(x_BLD).reshape(B, L, c.n_kv_heads, c.head_dim), positions_BL, c.rope_base)
    v = self.v(x_BLD).reshape(B, L, c.n_kv_heads, c.head_dim)
    return k, v

  def __call__(self, x_BLD, positions_BL, mask_BLK, prefix_kv=None):
    """Attends `x` to [prefix keys, own keys]; returns (output, own (k, v)).

    `mask_BLK` covers the concatenated keys: [B, L, prefix_len + L].
    """
    B, L, _ = x_BLD.shape
    c = self.cfg
    q = rope(self.q(x_BLD).reshape(B, L, c.n_heads, c.head_dim), positions_BL, c.rope_base)
    k, v = self.kv(x_BLD, positions_BL)
    keys, values = k, v
    if prefix_kv is not None:
      keys = jnp.concatenate([prefix_kv[0].astype(k.dtype), k], axis=1)
      values = jnp.concatenate([prefix_kv[1].astype(v.dtype), v], axis=1)
    out = attend(q, keys, values, mask_BLK)
    return self.o(out.reshape(B, L, c.n_heads * c.head_dim)), (k, v)


def attend(q_BLHD, k_BKGD, v_BKGD, mask_BLK):
  """Grouped-query attention in float32 softmax; G kv heads serve H/G query heads."""
  B, L, H, D = q_BLHD.shape
  G = k_BKGD.shape[2]
  q = q_BLHD.reshape(B, L, G, H // G, D)
  logits = jnp.einsum("blgrd,bkgd->bgrlk", q, k_BKGD).astype(jnp.float32) / jnp.sqrt(D)
  logits = jnp.where(mask_BLK[:, None, None, :, :], logits, _NEG_INF)
  probs = jax.nn.softmax(logits, axis=-1).astype(v_BKGD.dtype)
  out = jnp.einsum("bgrlk,bkgd->blgrd", probs, v_BKGD)
  return out.reshape(B, L, H, D)


class MLP(nnx.Module):

  def __init__(self, cfg: ModelConfig, rules, rngs: nnx.Rngs):
    dtype = jnp.dtype(cfg.dtype)
    lin = lambda i, o, names: nnx.Linear(
        i, o, use_bias=False, dtype=dtype,
        kernel_init=_init(nnx.initializers.lecun_normal(), names, rules), rngs=rngs)
    self.gate = lin(cfg.d_model, cfg.d_ff, ("embed", "mlp"))
    self.up = lin(cfg.d_model, cfg.d_ff, ("embed", "mlp"))
    self.down = lin(cfg.d_ff, cfg.d_model, ("mlp", "embed"))

  def __call__(self, x):
    return self.down(jax.nn.silu(self.gate(x)) * self.up(x))


class Block(nnx.Module):

  def __init__(self, cfg: ModelConfig, rules, rngs: nnx.Rngs):
    self.attn_norm = RMSNorm(cfg.d_model, rules)
    self.attn = Attention(cfg, rules, rngs)
    self.mlp_norm = RMSNorm(cfg.d_model, rules)
    self.mlp = MLP(cfg, rules, rngs)

  def __call__(self, x, positions, mask, prefix_kv=None):
    h, kv = self.attn(self.attn_norm(x), positions, mask, prefix_kv)
    x = x + h
    return x + self.mlp(self.mlp_norm(x)), kv


def attention_mask(segment_ids_BL, target_mask_BL, mode: str):
  """[B, L, L] boolean mask for one packed row (see module docstring)."""
  seg_q, seg_k = segment_ids_BL[:, :, None], segment_ids_BL[:, None, :]
  mask = (seg_q == seg_k) & (seg_k > 0)
  L = segment_ids_BL.shape[1]
  if mode == "causal":
    mask &= jnp.tril(jnp.ones((L, L), bool))[None]
  elif mode == "prefix":
    is_target_q = target_mask_BL[:, :, None] > 0
    is_target_k = target_mask_BL[:, None, :] > 0
    mask &= is_target_q | ~is_target_k
  # A padding query attends to itself only, so its (unused) output is finite.
  eye = jnp.eye(L, dtype=bool)[None]
  return mask | (eye & (seg_q == 0))


class Transformer(nnx.Module):
  """tokens [B, L] -> logits [B, L, V]."""

  def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs,
               rules: Mapping[str, object] | None = None):
    cfg.validate()
    rules = sharding.rules_dict(rules if rules is not None else sharding.DEFAULT_RULES)
    self.cfg = cfg
    self.embed = nnx.Embed(
        cfg.vocab_size, cfg.d_model, dtype=jnp.dtype(cfg.dtype),
        embedding_init=_init(nnx.initializers.normal(0.02), ("vocab", "embed"), rules),
        rngs=rngs)
    self.blocks = nnx.List([Block(cfg, rules, rngs) for _ in range(cfg.n_layers)])
    self.final_norm = RMSNorm(cfg.d_model, rules)
    if not cfg.tie_embeddings:
      self.unembed = nnx.Linear(
          cfg.d_model, cfg.vocab_size, use_bias=False, dtype=jnp.dtype(cfg.dtype),
          kernel_init=_init(nnx.initializers.normal(0.02), ("embed", "vocab"), rules),
          rngs=rngs)

  def logits(self, x_BLD):
    """Final norm and output projection of hidden states: [..., D] -> float32 [..., V]."""
    x = self.final_norm(x_BLD)
    if self.cfg.tie_embeddings:
      return self.embed.attend(x).astype(jnp.float32)
    return self.unembed(x).astype(jnp.float32)

  def _block(self, block, x, positions, mask, prefix_kv):
    if self.cfg.remat:
      return nnx.remat(lambda b, *a: b(*a))(block, x, positions, mask, prefix_kv)
    return block(x, positions, mask, prefix_kv)

  def __call__(self, tokens_BL, positions_BL=None, segment_ids_BL=None, target_mask_BL=None):
    """Logits for a packed batch; defaults: one unpadded example per row."""
    return self.logits(self.hidden(tokens_BL, positions_BL, segment_ids_BL, target_mask_BL))

  def hidden(self, tokens_BL, positions_BL=None, segment_ids_BL=None, target_mask_BL=None):
    """Last-layer hidden states [B, L, D] (before the final norm).

    Callers that need logits of a few positions only (the samplers and the
    GRPO estimators score the target canvas, not the context) slice these
    first: the output projection is the largest matmul of a small model.
    """
    B, L = tokens_BL.shape
    if positions_BL is None:
      positions_BL = jnp.broadcast_to(jnp.arange(L), (B, L))
    if segment_ids_BL is None:
      segment_ids_BL = jnp.ones((B, L), jnp.int32)
    if target_mask_BL is None:
      target_mask_BL = jnp.zeros((B, L), jnp.int32)
    mask = attention_mask(segment_ids_BL, target_mask_BL, self.cfg.attention)
    x = self.embed(tokens_BL)
    for block in self.blocks:
      x, _ = self._block(block, x, positions_BL, mask, None)
    return x

  def encode_context(self, tokens_BC, valid_BC):
    """Per-layer context keys/values under prefix (or causal) attention.

    `valid_BC` marks real context tokens (the samplers left-pad contexts to
    a bucket). Positions are the column indices 0..C-1, so a row's real
    tokens are shifted by its padding; RoPE attention depends only on
    position differences, so target positions C + j keep the training-time
    offsets. Returns a list of (k, v), each [B, C, kv_heads, head_dim].
    """
    B, C = tokens_BC.shape
    positions = jnp.broadcast_to(jnp.arange(C), (B, C))
    seg = valid_BC.astype(jnp.int32)
    mode = "causal" if self.cfg.attention == "causal" else "bidirectional"
    mask = attention_mask(seg, jnp.zeros_like(seg), mode)
    x = self.embed(tokens_BC)
    cache = []
    for block in self.blocks:
      x, kv = block(x, positions, mask, None)
      cache.append(kv)
    return cache

  def decode_target(self, tokens_BT, positions_BT, cache, key_mask_BTK):
    """Logits of target tokens attending to cached context keys and to each other.

    `key_mask_BTK` is [B, T, C + T]: which cached and which target keys each
    target token may see.
    """
    x = self.embed(tokens_BT)
    for block, kv in zip(self.blocks, cache):
      x, _ = block(x, positions_BT, key_mask_BTK, kv)
    return self.logits(x)
