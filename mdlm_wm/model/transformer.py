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

Options beyond the Llama core exist so pretrained checkpoints import exactly
(`model/hf_import.py`): an explicit head size (`d_head`, Qwen3), biases on the
q/k/v projections (Qwen2) and RMSNorm on each query/key head (Qwen3).
Activation rematerialization is a named policy (`REMAT_POLICIES`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec as P

from mdlm_wm.model import sharding

ATTENTION_MODES = ("bidirectional", "causal", "prefix")
_NEG_INF = -1e9  # finite: a fully masked row (padding) must not produce NaN

# What the backward pass of a block may keep from its forward pass:
#   none: everything (no remat); full: only the block's inputs (recompute the
#   whole block); dots: every matmul output, attention scores included;
#   dots_no_batch: only the weight matmuls (projections, MLP), so the
#   [B, H, L, L] attention scores and probabilities are recomputed.
# Host offloading (jax's offload_* policies) is left out: the CPU backend
# cannot run it, and the tests must.
REMAT_POLICIES = ("none", "full", "dots", "dots_no_batch")
_CHECKPOINT_POLICIES = {
    "full": None,
    "dots": jax.checkpoint_policies.dots_saveable,
    "dots_no_batch": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
}


def remat_policy(value: bool | str) -> str:
  """The canonical policy name of a `remat` config value (raises if unknown).

  Configs and checkpoint metas written before policies existed hold a bool:
  True rematerialized whole blocks ("full"), False nothing ("none").
  """
  if isinstance(value, bool):
    return "full" if value else "none"
  if value not in REMAT_POLICIES:
    raise ValueError(f"remat: must be one of {REMAT_POLICIES} (or a bool), got {value!r}")
  return value


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
  remat: str = "none"  # one of REMAT_POLICIES; a bool (older configs, metas) is converted
  d_head: int = 0  # 0: d_model // n_heads
  norm_eps: float = 1e-6
  qkv_bias: bool = False
  qk_norm: bool = False

  def __post_init__(self):
    if isinstance(self.remat, bool):
      object.__setattr__(self, "remat", remat_policy(self.remat))

  @property
  def head_dim(self) -> int:
    return self.d_head or self.d_model // self.n_heads

  def validate(self) -> None:
    """Raises ValueError naming the field first (`n_heads: ...`); config.validate
    runs it on the `model` block, so a config error names `config.model.<field>`."""
    if self.vocab_size < 1:
      raise ValueError(f"vocab_size: must be >= 1, got {self.vocab_size}")
    if self.attention not in ATTENTION_MODES:
      raise ValueError(f"attention: must be one of {ATTENTION_MODES}, got {self.attention!r}")
    if self.d_head < 0:
      raise ValueError(f"d_head: must be >= 0 (0: d_model // n_heads), got {self.d_head}")
    if not self.d_head and self.d_model % self.n_heads:
      raise ValueError(f"d_model: must be divisible by n_heads ({self.d_model} % {self.n_heads}) "
                       "or d_head set")
    if self.n_heads % self.n_kv_heads:
      raise ValueError(f"n_heads: must be a multiple of n_kv_heads ({self.n_heads} % "
                       f"{self.n_kv_heads})")
    if self.head_dim % 2:
      raise ValueError(f"{'d_head' if self.d_head else 'd_model'}: the head size "
                       f"({self.head_dim}) must be even for RoPE")
    if self.dtype not in ("float32", "bfloat16"):
      raise ValueError(f"dtype: must be float32 or bfloat16, got {self.dtype!r}")
    if self.norm_eps <= 0:
      raise ValueError(f"norm_eps: must be > 0, got {self.norm_eps}")
    remat_policy(self.remat)

  def num_params(self) -> int:
    d, f, v = self.d_model, self.d_ff, self.vocab_size
    q, kv = self.n_heads * self.head_dim, self.n_kv_heads * self.head_dim
    attn = 2 * d * q + 2 * d * kv
    if self.qkv_bias:
      attn += q + 2 * kv
    if self.qk_norm:
      attn += 2 * self.head_dim
    per_layer = attn + 3 * d * f + 2 * d
    return v * d * (1 if self.tie_embeddings else 2) + self.n_layers * per_layer + d

  def flops_per_token(self, seq_len: int) -> int:
    """Training FLOPs per token (forward + backward = 3x forward), incl. attention."""
    non_embed = self.num_params() - self.vocab_size * self.d_model * (
        1 if self.tie_embeddings else 2)
    matmul = 2 * (non_embed + self.vocab_size * self.d_model)
    attention = 2 * 2 * self.n_layers * seq_len * self.n_heads * self.head_dim
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
    lin = lambda i, o, names, bias=False: nnx.Linear(
        i, o, use_bias=bias, dtype=dtype,
        kernel_init=_init(nnx.initializers.lecun_normal(), names, rules),
        bias_init=_init(nnx.initializers.zeros_init(), names[1:], rules), rngs=rngs)
    self.q = lin(d, cfg.n_heads * hd, ("embed", "heads"), cfg.qkv_bias)
    self.k = lin(d, cfg.n_kv_heads * hd, ("embed", "kv_heads"), cfg.qkv_bias)
    self.v = lin(d, cfg.n_kv_heads * hd, ("embed", "kv_heads"), cfg.qkv_bias)
    self.o = lin(cfg.n_heads * hd, d, ("heads", "embed"))
    if cfg.qk_norm:
      self.q_norm = RMSNorm(hd, rules, cfg.norm_eps)
      self.k_norm = RMSNorm(hd, rules, cfg.norm_eps)
    self.cfg = cfg

  def _heads(self, name: str, x_BLD, n_heads: int):
    """Query or key (`name` q or k) heads [B, L, heads, head_dim], normed if configured."""
    B, L, _ = x_BLD.shape
    h = getattr(self, name)(x_BLD).reshape(B, L, n_heads, self.cfg.head_dim)
    return getattr(self, f"{name}_norm")(h) if self.cfg.qk_norm else h

  def kv(self, x_BLD, positions_BL):
    """Keys (with RoPE) and values of `x`: each [B, L, kv_heads, head_dim]."""
    B, L, _ = x_BLD.shape
    c = self.cfg
    k = rope(self._heads("k", x_BLD, c.n_kv_heads), positions_BL, c.rope_base)
    v = self.v(x_BLD).reshape(B, L, c.n_kv_heads, c.head_dim)
    return k, v

  def __call__(self, x_BLD, positions_BL, mask_BLK, prefix_kv=None):
    """Attends `x` to [prefix keys, own keys]; returns (output, own (k, v)).

    `mask_BLK` covers the concatenated keys: [B, L, prefix_len + L].
    """
    B, L, _ = x_BLD.shape
    c = self.cfg
    q = rope(self._heads("q", x_BLD, c.n_heads), positions_BL, c.rope_base)
    k, v = self.kv(x_BLD, positions_BL)
    parts = [(k, v)]
    if prefix_kv is not None:
      parts.insert(0, tuple(x.astype(k.dtype) for x in prefix_kv))
    out = attend(q, parts, mask_BLK)
    return self.o(out.reshape(B, L, c.n_heads * c.head_dim)), (k, v)


def attend(q_BLHD, kv_parts, mask_BLK):
  """Grouped-query attention, softmax in float32; G kv heads serve H/G query heads.

  `kv_parts` is a list of (keys, values) [B, K_i, G, D] read as one sequence
  of sum(K_i) keys, which `mask_BLK` covers. Decoders pass [cache, own]: one
  softmax over both parts (a shared max, one normaliser) spares copying the
  whole cache per layer and step to join it to the slots' keys. Measured on
  the quickstart model's decoding shapes (32 rows, cache 519; one core,
  another job on the other): 1 slot 3.7 -> 1.1 ms a layer, 8 slots 5.6 ->
  3.2. One part (training) takes
  `jax.nn.softmax`: the same form for it cost training a fifth of its speed.
  """
  B, L, H, D = q_BLHD.shape
  G = kv_parts[0][0].shape[2]
  q = q_BLHD.reshape(B, L, G, H // G, D)
  if len(kv_parts) == 1:  # training and prefill: jax.nn.softmax keeps its one-pass gradient
    (k, v), = kv_parts
    logits = jnp.einsum("blgrd,bkgd->bgrlk", q, k).astype(jnp.float32) / jnp.sqrt(D)
    logits = jnp.where(mask_BLK[:, None, None, :, :], logits, _NEG_INF)
    probs = jax.nn.softmax(logits, axis=-1).astype(v.dtype)
    return jnp.einsum("bgrlk,bkgd->blgrd", probs, v).reshape(B, L, H, D)
  scores, start = [], 0
  for k, _ in kv_parts:
    s = jnp.einsum("blgrd,bkgd->bgrlk", q, k).astype(jnp.float32) / jnp.sqrt(D)
    mask = jax.lax.slice_in_dim(mask_BLK, start, start + k.shape[1], axis=-1)
    scores.append(jnp.where(mask[:, None, None, :, :], s, _NEG_INF))
    start += k.shape[1]
  top = functools.reduce(jnp.maximum, [s.max(axis=-1, keepdims=True) for s in scores])
  weights = [jnp.exp(s - top) for s in scores]
  norm = sum(w.sum(axis=-1, keepdims=True) for w in weights)
  out = sum(jnp.einsum("bgrlk,bkgd->bgrld", w.astype(v.dtype), v).astype(jnp.float32)
            for w, (_, v) in zip(weights, kv_parts))
  out = (out / norm).astype(kv_parts[-1][1].dtype)
  return out.transpose(0, 3, 1, 2, 4).reshape(B, L, H, D)


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
    self.attn_norm = RMSNorm(cfg.d_model, rules, cfg.norm_eps)
    self.attn = Attention(cfg, rules, rngs)
    self.mlp_norm = RMSNorm(cfg.d_model, rules, cfg.norm_eps)
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
    # The (abstract, hashable) mesh the params are created on, for _batch_sharded.
    self._mesh = jax.sharding.get_abstract_mesh()
    self._batch_axes = rules.get("batch")
    self.embed = nnx.Embed(
        cfg.vocab_size, cfg.d_model, dtype=jnp.dtype(cfg.dtype),
        embedding_init=_init(nnx.initializers.normal(0.02), ("vocab", "embed"), rules),
        rngs=rngs)
    self.blocks = nnx.List([Block(cfg, rules, rngs) for _ in range(cfg.n_layers)])
    self.final_norm = RMSNorm(cfg.d_model, rules, cfg.norm_eps)
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

  def _batch_sharded(self, x_BLD):
    """Pins the residual stream to the batch sharding (data x fsdp) of the mesh.

    Left to propagation, GSPMD follows the FSDP-sharded params instead and
    keeps activations of the whole global batch on every device: measured
    with launch.aot on TPU v5e, a 2-layer 1B-width model needed 15.9 GiB of
    temporaries per chip for 32 sequences on 8 chips, vs 3.2 GiB for 4 on one.
    Rows that do not divide evenly (a sampler's B x G) are left to GSPMD.
    """
    axes = self._batch_axes
    if self._mesh.empty or not axes:
      return x_BLD
    shards = math.prod(self._mesh.shape[a] for a in (axes if isinstance(axes, tuple) else (axes,)))
    if shards == 1 or x_BLD.shape[0] % shards:
      return x_BLD
    spec = P(axes, *([None] * (x_BLD.ndim - 1)))
    return jax.lax.with_sharding_constraint(x_BLD, NamedSharding(self._mesh, spec))

  def _block(self, block, x, positions, mask, prefix_kv):
    if self.cfg.remat == "none":
      return block(x, positions, mask, prefix_kv)
    # jax.checkpoint of a pure function of the block's state: unlike nnx.remat
    # it also traces inside the samplers' lax.scan (blocks hold no mutable state).
    graphdef, state = nnx.split(block)

    def run(state, x, positions, mask, prefix_kv):
      return nnx.merge(graphdef, state)(x, positions, mask, prefix_kv)

    policy = _CHECKPOINT_POLICIES[self.cfg.remat]
    return jax.checkpoint(run, policy=policy)(state, x, positions, mask, prefix_kv)

  def __call__(self, tokens_BL, positions_BL=None, segment_ids_BL=None, target_mask_BL=None,
               mask_BLL=None):
    """Logits for a packed batch; defaults: one unpadded example per row."""
    return self.logits(self.hidden(tokens_BL, positions_BL, segment_ids_BL, target_mask_BL,
                                   mask_BLL))

  def hidden(self, tokens_BL, positions_BL=None, segment_ids_BL=None, target_mask_BL=None,
             mask_BLL=None):
    """Last-layer hidden states [B, L, D] (before the final norm).

    `mask_BLL` replaces the attention mode's mask (the block-diffusion
    objective builds its own, diffusion/block.py).

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
    mask = (attention_mask(segment_ids_BL, target_mask_BL, self.cfg.attention)
            if mask_BLL is None else mask_BLL)
    x = self._batch_sharded(self.embed(tokens_BL))
    for block in self.blocks:
      x, _ = self._block(block, x, positions_BL, mask, None)
      x = self._batch_sharded(x)
    return x

  def encode_context(self, tokens_BC, valid_BC, causal: bool | None = None):
    """Per-layer context keys/values under prefix (or causal) attention.

    `valid_BC` marks real context tokens (the samplers left-pad contexts to
    a bucket). Positions are the column indices 0..C-1, so a row's real
    tokens are shifted by its padding; RoPE attention depends only on
    position differences, so target positions C + j keep the training-time
    offsets. `causal` (default: the model's attention is causal) encodes
    the context left to right. Returns a list of (k, v), each
    [B, C, kv_heads, head_dim].
    """
    B, C = tokens_BC.shape
    positions = jnp.broadcast_to(jnp.arange(C), (B, C))
    seg = valid_BC.astype(jnp.int32)
    causal = self.cfg.attention == "causal" if causal is None else causal
    mode = "causal" if causal else "bidirectional"
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


def abstract_model(cfg: ModelConfig, mesh: jax.sharding.Mesh, rules=None):
  """(graphdef, params) with every param a ShapeDtypeStruct sharded on `mesh`:
  the model's layout without allocating it (AOT compiles, checkpoint imports)."""
  with jax.set_mesh(mesh):
    model = nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0), rules=rules))
  graphdef, state = nnx.split(model)
  # eval_shape leaves shardings on an abstract mesh; lowering and device_put need the real one.
  params = jax.tree.map(
      lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype,
                                     sharding=NamedSharding(mesh, x.sharding.spec)),
      nnx.to_pure_dict(state))
  return graphdef, params
