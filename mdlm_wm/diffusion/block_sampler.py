"""The block-diffusion sampler: block by block over a KV cache, each block
denoised inside one jitted loop.

The context is encoded once (causally with the logit shift, as the model was
trained) into a fixed-size per-layer cache of [context | target blocks].
Block k is then denoised in up to `steps` steps: its b slots (with the shift:
the last token of block k-1, or the <target> marker, then labels kb..kb+b-2;
without it: labels kb..kb+b-1, [MASK] until committed) attend to the valid
context, the committed blocks before k and themselves; each step draws every
free label (temperature, top-p), scores it by a confidence and commits the
most confident ones: as many as the schedule says, or, with a `threshold`,
every label above it (at least one per step). An order that does not look
at the draw (`left_to_right`, `random`) ranks first and projects and draws
only the labels it will commit: the same distribution, a fraction of the
cost (at one token a step, 1 slot of b). A committed block's clean
keys/values (causal inside the block for a model trained with
`causal_clean`) reach the cache in the same forward as the next block's
first step: one call of 2b slots, [clean block k-1 | noisy block k], with
the training mask between the two copies. So a block of b costs `steps`
forwards, not `steps` + 1, and the last block's clean pass is never run.
Decoding stops after the block that holds <eot> in every row (a
`lax.while_loop`; rows that finished earlier only wait).

Pins (`fixed_BT >= 0`, anchor infilling) are committed from the start. The
model sees a pin once the block that holds it is reached (blocks attend only
to the left); a pinned trailing anchor is honoured by construction: its
tokens are written as pinned, and no free label before the last pinned
token may be <eot>, so the text cannot end before its anchor.

Classifier-free guidance on the steer runs every forward on 2N rows (the
context with and without the steer's tokens, caches kept per view) and
draws from uncond + (1 + cfg_scale) * (cond - uncond).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from mdlm_wm.data.block_rows import CLEAN, NOISY
from mdlm_wm.diffusion import block as block_lib
from mdlm_wm.diffusion.sampler import (_confidence, _top_k_mask, committed_fraction,
                                       validate_denoising)
from mdlm_wm.model.sampling import fold_in, row_keys, sample_tokens, split


# Confidences that rank positions without looking at the draw: the sampler
# picks the positions to commit first and draws (and projects to logits)
# only those.
_DRAW_FREE = ("left_to_right", "random")


@dataclasses.dataclass(frozen=True)
class BlockSamplerConfig:
  block_size: int = 8
  steps: int = 8  # denoising steps per block (at most; a threshold may finish sooner)
  temperature: float = 1.0  # 0: greedy
  top_p: float = 1.0
  confidence: str = "top1"
  threshold: float = 0.0  # > 0: commit every label whose confidence exceeds it
  cfg_scale: float = 0.0
  schedule: str = "loglinear"
  shift: bool = True  # as the model was trained (config.diffusion.shift)
  causal_clean: bool = False  # as trained: the clean pass is causal in its block
  # False: every step recomputes [context | blocks | block] with the training
  # mask instead of reading the cache (the reference the cache is tested against).
  kv_cache: bool = True

  def validate(self) -> None:
    if self.block_size < 1:
      raise ValueError(f"block_size: must be >= 1, got {self.block_size}")
    validate_denoising(self)
    if not 0.0 <= self.threshold < 1.0:
      raise ValueError(f"threshold: must be in [0, 1), got {self.threshold}")
    if self.threshold > 0 and self.confidence in _DRAW_FREE:
      raise ValueError(f"threshold: needs a confidence that is a probability, not "
                       f"{self.confidence!r}, which ranks positions without the draw")


def max_commits_per_step(block_size: int, steps: int, schedule: str) -> int:
  """The most labels one step of a block can commit without a threshold, over
  every count of free labels (pins leave fewer than `block_size`).

  The step commits max(1, round(n * frac[s]) - committed so far); the
  committed count never falls behind round(n * frac[s-1]), so the difference
  of the rounded schedule bounds it. Float32, as the jitted step computes it.
  """
  frac = committed_fraction(steps, schedule)
  most = 1
  for n in range(1, block_size + 1):
    done = np.round(np.float32(n) * frac).astype(np.int64)
    most = max(most, int(np.max(np.diff(done, prepend=0))))
  return most


def _run_blocks(model, tokens_NS, positions_NS, cache, key_mask_NSK):
  """The backbone on S slots against per-layer caches: (hidden [N, S, D],
  the slots' own per-layer (k, v))."""
  x = model.embed(tokens_NS)
  own = []
  for block, kv in zip(model.blocks, cache):
    x, new_kv = block(x, positions_NS, key_mask_NSK, kv)
    own.append(new_kv)
  return x, own


@functools.partial(jax.jit, static_argnames=("graphdef", "cfg", "num_samples", "mask_id",
                                             "eot_id"))
def _sample_jit(graphdef, params, context_BC, valid_WBC, fixed_BT, rng, *,
                cfg: BlockSamplerConfig, num_samples: int, mask_id: int, eot_id: int):
  model = nnx.merge(graphdef, params)
  W, B, C = valid_WBC.shape
  G, b = num_samples, cfg.block_size
  N = B * G
  T = fixed_BT.shape[1]
  K = -(-T // b)
  P = C - 1 if cfg.shift else C  # cached context length; slot i of block k sits at P + k*b + i
  # The cache holds [context | K blocks | b scratch slots]: block 0's fused
  # first step has no block before it, so its dummy clean half is written
  # to the scratch slots, which no query ever reads.
  L = P + K * b + b
  rep = lambda x: jnp.repeat(x, G, axis=0)  # prompt rows -> sample rows
  rng = rng if rng.ndim == 0 else row_keys(rng, G)

  # The context, encoded once per prompt and view, then shared by its samples.
  prefix = model.encode_context(jnp.tile(context_BC[:, :P], (W, 1)),
                                valid_WBC[:, :, :P].reshape(W * B, P), causal=cfg.shift)
  # Row order everywhere: view-major (w * N + n), sample n = b * G + g.
  view_rows = lambda x_WB: jnp.concatenate([rep(x_WB[w]) for w in range(W)])
  grow = lambda x: jnp.pad(x, ((0, 0), (0, L - P)) + ((0, 0),) * (x.ndim - 2))
  cache0 = [tuple(grow(view_rows(x.reshape((W, B) + x.shape[1:]))) for x in kv) for kv in prefix]
  prefix_valid = view_rows(valid_WBC[:, :, :P])  # [W*N, P]

  pad_T = K * b - T
  fixed = jnp.pad(rep(fixed_BT.astype(jnp.int32)), ((0, 0), (0, pad_T)), constant_values=eot_id)
  free0 = fixed < 0
  labels0 = jnp.where(free0, mask_id, fixed)
  # No free label before the last pinned non-<eot> token may be <eot>.
  j = jnp.arange(K * b)
  content_pin = (fixed >= 0) & (fixed != eot_id)
  last_pin = jnp.max(jnp.where(content_pin, j, -1), axis=-1)
  no_eot = j[None, :] < last_pin[:, None]
  first_token = rep(context_BC[:, C - 1]) if cfg.shift else None
  context_BC_rep = view_rows(jnp.broadcast_to(context_BC, (W, B, C)))
  frac_S = jnp.asarray(committed_fraction(cfg.steps, cfg.schedule))
  draw_free = cfg.confidence in _DRAW_FREE
  n_cand = max_commits_per_step(b, cfg.steps, cfg.schedule) if draw_free else b

  def guided(logits_WNbV):
    if W == 1:
      return logits_WNbV[0]
    cond, uncond = logits_WNbV[0], logits_WNbV[1]
    return uncond + (1.0 + cfg.cfg_scale) * (cond - uncond)

  def slots_of(labels_Nb, prev_N):
    """The b slot inputs of a block from its labels (with the shift: prev, labels[:-1])."""
    if not cfg.shift:
      return labels_Nb
    return jnp.concatenate([prev_N[:, None], labels_Nb[:, :-1]], axis=1)

  def slots_of_all(labels_NL):
    """Every block's slot inputs at once: the clean copy of the target."""
    if not cfg.shift:
      return labels_NL
    return jnp.concatenate([first_token[:, None], labels_NL[:, :-1]], axis=1)

  def cached_keys(n_blocks):
    """[W*N, L]: the valid context and the first `n_blocks` blocks."""
    done = jnp.broadcast_to((jnp.arange(L - P) < n_blocks * b)[None, :], (W * N, L - P))
    return jnp.concatenate([prefix_valid, done], axis=1)

  def with_own(cached_NL, own_SS):
    """The key mask [W*N, S, L + S] of S slots that see `cached_NL` and, among
    themselves, `own_SS`."""
    S = own_SS.shape[0]
    return jnp.concatenate([jnp.broadcast_to(cached_NL[:, None, :], (W * N, S, L)),
                            jnp.broadcast_to(own_SS, (W * N, S, S))], axis=2)

  def block_hidden(k, cache, key_mask, inputs, positions, labels):
    """Final hidden states [W*N, b, D] of block k's slots: over the cache, or
    (kv_cache False) by recomputing [context | committed blocks | block] with
    the training mask."""
    if cfg.kv_cache:
      return _run_blocks(model, inputs, positions, cache, key_mask)[0]
    clean = jnp.tile(slots_of_all(labels), (W, 1))
    tokens = jnp.concatenate([context_BC_rep[:, :P], clean, inputs], axis=1)
    j = jnp.arange(K * b)
    role = jnp.concatenate([jnp.zeros(P, jnp.int32), jnp.full(K * b, CLEAN),
                            jnp.full(b, NOISY)])
    blk = jnp.concatenate([jnp.full(P, -1), j // b, jnp.full(b, k)])
    pos = jnp.concatenate([jnp.arange(P), P + j, positions[0]])
    seg = jnp.concatenate([prefix_valid, jnp.broadcast_to((j < k * b)[None, :], (W * N, K * b)),
                           jnp.ones((W * N, b), bool)], axis=1).astype(jnp.int32)
    shape = tokens.shape
    mask = block_lib.block_attention_mask(seg, jnp.broadcast_to(role, shape),
                                          jnp.broadcast_to(blk, shape),
                                          jnp.broadcast_to(pos, shape), cfg.shift,
                                          causal_clean=cfg.causal_clean)
    return model.hidden(tokens, jnp.broadcast_to(pos, shape), seg, None, mask)[:, -b:]

  clean_own = jnp.tril(jnp.ones((b, b), bool)) if cfg.causal_clean else jnp.ones((b, b), bool)

  def fused_first_step(k, cache, labels, inputs):
    """Block k-1's clean pass and block k's first step in one forward of 2b
    slots: (the cache with block k-1 written, block k's hidden [W*N, b, D])."""
    clean = jax.lax.dynamic_slice_in_dim(slots_of_all(labels), jnp.maximum(k - 1, 0) * b, b,
                                         axis=1)
    tokens = jnp.concatenate([jnp.tile(clean, (W, 1)), inputs], axis=1)
    start = P + (k - 1) * b
    positions = jnp.broadcast_to(start + jnp.arange(2 * b), (W * N, 2 * b))
    has_prev = k > 0
    own = jnp.block([[clean_own, jnp.zeros((b, b), bool)],
                     [jnp.full((b, b), has_prev), jnp.ones((b, b), bool)]])
    x, own_kv = _run_blocks(model, tokens, positions, cache, with_own(cached_keys(k - 1), own))
    at = jnp.where(has_prev, start, L - b)
    cache = [tuple(jax.lax.dynamic_update_slice_in_dim(c, o[:, :b], at, axis=1)
                   for c, o in zip(kv, o_kv)) for kv, o_kv in zip(cache, own_kv)]
    return cache, x[:, b:]

  def denoise_block(k, cache, labels, commit_step, prev_N):
    start = k * b
    blk_labels = jax.lax.dynamic_slice_in_dim(labels, start, b, axis=1)
    blk_free = jax.lax.dynamic_slice_in_dim(free0, start, b, axis=1)
    blk_no_eot = jax.lax.dynamic_slice_in_dim(no_eot, start, b, axis=1)
    positions = jnp.broadcast_to(P + start + jnp.arange(b), (W * N, b))
    key_mask = with_own(cached_keys(k), jnp.ones((b, b), bool))
    n_free = jnp.sum(blk_free, axis=-1)
    inputs_of = lambda blk: jnp.tile(slots_of(blk, prev_N), (W, 1))
    if cfg.kv_cache:
      cache, hidden0 = fused_first_step(k, cache, labels, inputs_of(blk_labels))
    else:
      hidden0 = block_hidden(k, cache, key_mask, inputs_of(blk_labels), positions, labels)

    def cond(carry):
      s, blk, _ = carry
      return (s < cfg.steps) & jnp.any(blk_free & (blk == mask_id))

    def advance(s, blk, blk_commit, hidden):
      """Step s: draws labels from `hidden` (the block's final hidden states)
      and commits some. Only the candidate slots are projected and drawn:
      every slot, or with a draw-free confidence the n_cand it ranks first."""
      masked = blk_free & (blk == mask_id)
      n_masked = jnp.sum(masked, axis=-1)
      n_sched = jnp.round(n_free * frac_S[s]).astype(jnp.int32) - (n_free - n_masked)
      n_commit = jnp.where(s == cfg.steps - 1, n_masked, jnp.maximum(n_sched, 1))
      key_sample, key_conf = split(fold_in(rng, k * cfg.steps + s))
      if draw_free:
        conf = _confidence(cfg.confidence, key_conf, None, blk)
        slot = jnp.argsort(-jnp.where(masked, conf, -jnp.inf), axis=-1, stable=True)[:, :n_cand]
      else:
        slot = jnp.broadcast_to(jnp.arange(b), (N, b))
      pick = lambda x: jnp.take_along_axis(x, slot, axis=1)
      h = jnp.take_along_axis(hidden, jnp.tile(slot, (W, 1))[..., None], axis=1)
      logits = guided(model.logits(h).reshape((W, N, n_cand, -1)))
      logits = logits.at[..., mask_id].set(-jnp.inf)
      logits = logits.at[..., eot_id].set(jnp.where(pick(blk_no_eot), -jnp.inf,
                                                    logits[..., eot_id]))
      sampled = sample_tokens(key_sample, logits, cfg.temperature, cfg.top_p)
      conf = pick(conf) if draw_free else _confidence(cfg.confidence, key_conf, logits, sampled)
      commit = _top_k_mask(conf, pick(masked), n_commit)
      if cfg.threshold > 0:
        commit = commit | (pick(masked) & (conf > cfg.threshold))
      # Back from the candidates to the block's b slots.
      onehot = commit[..., None] & (slot[..., None] == jnp.arange(b))  # [N, n_cand, b]
      at = jnp.any(onehot, axis=1)
      drawn = jnp.sum(jnp.where(onehot, sampled[..., None], 0), axis=1)
      return (s + 1, jnp.where(at, drawn, blk), jnp.where(at, k * cfg.steps + s, blk_commit))

    def step(carry):
      s, blk, blk_commit = carry
      return advance(s, blk, blk_commit,
                     block_hidden(k, cache, key_mask, inputs_of(blk), positions, labels))

    blk_commit0 = jax.lax.dynamic_slice_in_dim(commit_step, start, b, axis=1)
    # A block with nothing to draw (all pinned) commits nothing at step 0.
    _, blk, blk_commit = jax.lax.while_loop(cond, step,
                                            advance(jnp.int32(0), blk_labels, blk_commit0,
                                                    hidden0))
    labels = jax.lax.dynamic_update_slice_in_dim(labels, blk, start, axis=1)
    commit_step = jax.lax.dynamic_update_slice_in_dim(commit_step, blk_commit, start, axis=1)
    return cache, labels, commit_step, blk[:, -1], jnp.any(blk == eot_id, axis=-1)

  def outer_cond(c):
    k, _, _, _, _, done = c
    return (k < K) & ~jnp.all(done)

  def outer(c):
    k, cache, labels, commit_step, prev, done = c
    cache, labels, commit_step, last, has_eot = denoise_block(k, cache, labels, commit_step,
                                                              prev)
    return k + 1, cache, labels, commit_step, last, done | has_eot

  commit0 = jnp.full((N, K * b), -1, jnp.int32)
  prev0 = first_token if cfg.shift else jnp.zeros((N,), jnp.int32)
  init = (0, cache0, labels0, commit0, prev0, jnp.zeros((N,), bool))
  k_end, _, labels, commit_step, _, _ = jax.lax.while_loop(outer_cond, outer, init)
  # Blocks never reached (every row had ended) are <eot>: text stops at the first one.
  labels = jnp.where(labels == mask_id, eot_id, labels)
  return labels[:, :T].reshape(B, G, T), commit_step[:, :T].reshape(B, G, T), k_end


def sample(graphdef, params, context_BC, context_valid_BC, fixed_BT, rng, cfg: BlockSamplerConfig,
           *, num_samples: int, mask_id: int, eot_id: int, uncond_valid_BC=None):
  """Draws `num_samples` targets per prompt: (tokens [B, G, T], commit step
  [B, G, T] (-1 where pinned), blocks decoded).

  Arguments as `diffusion.sampler.sample`: `context_BC` left-padded and ending
  with the <target> marker; `fixed_BT` pins (-1 free); `rng` one key or one
  per prompt; `uncond_valid_BC` (cfg_scale > 0) the valid mask without the
  steer's tokens.
  """
  cfg.validate()
  if cfg.cfg_scale > 0 and uncond_valid_BC is None:
    raise ValueError("cfg_scale > 0 needs uncond_valid_BC (the context mask without the steer)")
  views = [context_valid_BC] if cfg.cfg_scale == 0 else [context_valid_BC, uncond_valid_BC]
  valid = jnp.stack([jnp.asarray(v, bool) for v in views])
  return _sample_jit(graphdef, params, jnp.asarray(context_BC, jnp.int32), valid,
                     jnp.asarray(fixed_BT, jnp.int32), rng, cfg=cfg, num_samples=num_samples,
                     mask_id=mask_id, eot_id=eot_id)
