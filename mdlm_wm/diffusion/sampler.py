"""The MDLM denoising sampler: one `jax.jit` over a `lax.scan` of denoising steps.

The target canvas of T positions starts as [MASK] everywhere except where the
caller pins a token (`fixed_BT >= 0`: anchor infilling). Each step predicts
every position, draws a token per position (Gumbel-max in float32 with
temperature and optional top-p), scores each draw by a confidence, and commits
the k most confident still-masked positions; k follows the masking schedule so
that the last step leaves nothing masked. Committed and pinned tokens never
change, so `commit_step_BGT` plus the final tokens replay the whole denoising.

Two forward paths give the same logits on a `prefix`-attention model:
  * full: the backbone runs on [context | canvas] every step;
  * prefix cache: the context is encoded once per call (`encode_context`) and
    every step runs only the canvas against the cached keys/values
    (`decode_target`), shared by all steps and all G samples.

Positions: context tokens are left-padded; valid context tokens of row b sit
at positions 0..len_b-1 and target position j at len_b + j, as in training.
`encode_context` places the context at 0..C-1 instead, i.e. every token of
row b shifted by the row's padding C - len_b; the cache path therefore puts
target j at C + j. RoPE attention depends only on position differences, so
the shift changes nothing but float rounding.

Keys: one key for the whole call, or one key per prompt ([B] keys). With a
key per prompt, sample g of prompt b draws all its noise from
fold_in(key_b, g), so its randomness does not depend on which other prompts
share the call (a batch of environments then matches stepping each alone, up
to the float rounding of other padding widths: none on CPU in the tests).

Classifier-free guidance (on the steer z, which training drops by hiding its
tokens from attention): the unconditional pass uses `uncond_valid_BC`, the
context mask without the steer tokens, at unchanged positions. Convention,
on raw logits before SUBS:
    guided = uncond + w * (cond - uncond),  w = 1 + cfg_scale,
so cfg_scale = 0 is the plain conditional model and larger values push
further away from the unsteered prediction.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from mdlm_wm.diffusion import schedule
from mdlm_wm.model.sampling import (check_draw_settings, draw, fold_in, row_keys, sample_tokens,
                                    split)

# left_to_right ranks by position only (leftmost masked first): with one token
# per step it decodes like an AR from the MDLM's own conditionals, the
# baseline that tells the model's quality from its decoding order's.
CONFIDENCES = ("top1", "margin", "entropy", "random", "left_to_right")


@dataclasses.dataclass(frozen=True)
class SamplerConfig:
  """Static sampler settings (hashable: one compilation per config and shape).

  `trajectory` additionally returns the canvas after every step; the final
  tokens and `commit_step_BGT` already determine it, so it exists to check
  that claim and for debugging.
  """
  steps: int = 32
  temperature: float = 1.0  # 0: greedy argmax
  top_p: float = 1.0  # 1: no nucleus filtering
  confidence: str = "top1"
  schedule: str = "loglinear"
  block_size: int = 0  # 0: the whole canvas is one block
  cfg_scale: float = 0.0  # 0: no classifier-free guidance
  use_prefix_cache: bool = False
  trajectory: bool = False

  def num_blocks(self, target_len: int) -> int:
    return 1 if self.block_size == 0 else target_len // self.block_size

  def validate(self, target_len: int) -> None:
    validate_denoising(self)
    if self.block_size:
      if self.block_size < 0 or target_len % self.block_size:
        raise ValueError(f"block_size: must divide the canvas length ({target_len}), got "
                         f"{self.block_size}")
      if self.steps % self.num_blocks(target_len):
        raise ValueError(f"steps: must be a multiple of the number of blocks "
                         f"({self.num_blocks(target_len)}), got {self.steps}: each block gets "
                         "steps * block_size / T steps")


def validate_denoising(cfg) -> None:
  """The settings both MDLM samplers share (SamplerConfig, BlockSamplerConfig)."""
  if cfg.steps < 1:
    raise ValueError(f"steps: must be >= 1, got {cfg.steps}")
  check_draw_settings(cfg.temperature, cfg.top_p)
  if cfg.confidence not in CONFIDENCES:
    raise ValueError(f"confidence: must be one of {CONFIDENCES}, got {cfg.confidence!r}")
  if cfg.schedule not in schedule.SCHEDULES:
    raise ValueError(f"schedule: must be one of {schedule.SCHEDULES}, got {cfg.schedule!r}")
  if cfg.cfg_scale < 0:
    raise ValueError(f"cfg_scale: must be >= 0, got {cfg.cfg_scale}")


class SampleOutput(NamedTuple):
  tokens_BGT: jax.Array  # int32; never the mask id
  commit_step_BGT: jax.Array  # int32 step that committed each position; -1 where pinned
  canvas_SBGT: jax.Array | None  # canvas after each step (SamplerConfig.trajectory)


def committed_fraction(steps: int, kind: str) -> np.ndarray:
  """Fraction of a block's free positions committed after each of `steps` steps.

  Step s moves time from 1 - s/steps to t = 1 - (s+1)/steps. A position is
  still masked at t with probability 1 - alpha(t); dividing by 1 - alpha(1)
  makes the start exactly all-masked (log-linear's alpha(1) = eps > 0), and
  t = 0 at the last step makes the end exactly all-committed.
  """
  t = 1.0 - np.arange(1, steps + 1, dtype=np.float64) / steps
  with jax.ensure_compile_time_eval():
    masked = (1.0 - np.asarray(schedule.alpha(t, kind), np.float64)) / (
        1.0 - float(schedule.alpha(np.float64(1.0), kind)))
  frac = np.clip(1.0 - masked, 0.0, 1.0)
  frac[-1] = 1.0
  return frac.astype(np.float32)


def _confidence(kind: str, key, logits_NTV, sampled_NT):
  """Higher = commit sooner. `logits` already exclude [MASK] (-inf)."""
  if kind == "random":
    return draw(jax.random.uniform, key, sampled_NT.shape)
  if kind == "left_to_right":
    return jnp.broadcast_to(-jnp.arange(sampled_NT.shape[-1], dtype=jnp.float32),
                            sampled_NT.shape)
  logp = jax.nn.log_softmax(logits_NTV, axis=-1)
  p = jnp.exp(logp)
  if kind == "top1":
    return jnp.take_along_axis(p, sampled_NT[..., None], axis=-1)[..., 0]
  if kind == "margin":
    top2 = jax.lax.top_k(p, 2)[0]
    return top2[..., 0] - top2[..., 1]
  # Negative entropy; p = 0 entries (the [MASK] class) contribute 0, not 0 * -inf.
  return jnp.sum(jnp.where(p > 0, p * logp, 0.0), axis=-1)


def _top_k_mask(conf_NT, candidate_NT, k_N):
  """The k_N most confident candidates of each row (ties: leftmost first)."""
  conf = jnp.where(candidate_NT, conf_NT, -jnp.inf)
  order = jnp.argsort(-conf, axis=-1, stable=True)
  rank = jnp.argsort(order, axis=-1)
  return candidate_NT & (rank < k_N[:, None])


def _logits_fn(model, cfg: SamplerConfig, context_BC, valid_WBC, num_samples: int):
  """Returns canvas_NT -> logits_NTV (guided, float32) for N = B * G rows.

  W = 2 views (conditional, unconditional) with guidance, else 1; both views
  run as one forward of W * N rows.
  """
  W, B, C = valid_WBC.shape
  G = num_samples
  scale = 1.0 + cfg.cfg_scale
  rep = lambda x: jnp.repeat(x, G, axis=0)  # row b -> rows b*G .. b*G+G-1

  def combine(logits_WNTV):
    if W == 1:
      return logits_WNTV[0]
    cond, uncond = logits_WNTV[0], logits_WNTV[1]
    return uncond + scale * (cond - uncond)

  if cfg.use_prefix_cache:
    if model.cfg.attention != "prefix":
      raise ValueError("use_prefix_cache needs a model with attention='prefix' (context keys "
                       f"must not depend on the target); this model is {model.cfg.attention!r}")
    cache = model.encode_context(jnp.tile(context_BC, (W, 1)), valid_WBC.reshape(W * B, C))
    # Encoded on W * B rows, once; row w*B + b serves rows (w*B + b)*G + g.
    cache = [tuple(rep(x) for x in kv) for kv in cache]
    valid_MC = rep(valid_WBC.reshape(W * B, C))

    def logits(canvas_NT):
      N, T = canvas_NT.shape
      canvas = jnp.tile(canvas_NT, (W, 1))
      positions = jnp.broadcast_to(C + jnp.arange(T), canvas.shape)
      key_mask = jnp.concatenate([valid_MC, jnp.ones((W * N, T), bool)], axis=1)
      key_mask = jnp.broadcast_to(key_mask[:, None, :], (W * N, T, C + T))
      out = model.decode_target(canvas, positions, cache, key_mask)
      return combine(out.reshape((W, N) + out.shape[1:]))

    return logits

  pad_B = C - jnp.sum(valid_WBC[0], axis=-1)
  context_MC = rep(jnp.tile(context_BC, (W, 1)))
  segment_MC = rep(valid_WBC.reshape(W * B, C)).astype(jnp.int32)

  def logits(canvas_NT):
    N, T = canvas_NT.shape
    tokens = jnp.concatenate([context_MC, jnp.tile(canvas_NT, (W, 1))], axis=1)
    positions = jnp.tile(rep(jnp.arange(C + T)[None, :] - pad_B[:, None]), (W, 1))
    ones = jnp.ones((W * N, T), jnp.int32)
    segments = jnp.concatenate([segment_MC, ones], axis=1)
    target_mask = jnp.concatenate([jnp.zeros_like(segment_MC), ones], axis=1)
    out = model.logits(model.hidden(tokens, positions, segments, target_mask)[:, C:])
    return combine(out.reshape((W, N) + out.shape[1:]))

  return logits


@functools.partial(jax.jit, static_argnames=("graphdef", "cfg", "num_samples", "mask_id"))
def _sample_jit(graphdef, params, context_BC, context_valid_BC, fixed_BT, rng, uncond_valid_BC,
                *, cfg: SamplerConfig, num_samples: int, mask_id: int) -> SampleOutput:
  model = nnx.merge(graphdef, params)
  B, T = fixed_BT.shape
  G = num_samples
  N = B * G
  views = [context_valid_BC] if uncond_valid_BC is None else [context_valid_BC, uncond_valid_BC]
  logits_fn = _logits_fn(model, cfg, context_BC, jnp.stack(views).astype(bool), G)

  rng = rng if rng.ndim == 0 else row_keys(rng, G)
  fixed_NT = jnp.repeat(fixed_BT.astype(jnp.int32), G, axis=0)
  free_NT = fixed_NT < 0
  canvas0 = jnp.where(free_NT, mask_id, fixed_NT)
  commit0 = jnp.full((N, T), -1, jnp.int32)

  n_blocks = cfg.num_blocks(T)
  block_len = T // n_blocks
  steps_per_block = cfg.steps // n_blocks
  frac_S = jnp.asarray(committed_fraction(steps_per_block, cfg.schedule))
  block_of_T = jnp.arange(T) // block_len

  def step(carry, s):
    canvas, commit_step = carry
    key_sample, key_conf = split(fold_in(rng, s))
    logits = logits_fn(canvas).astype(jnp.float32).at[..., mask_id].set(-jnp.inf)  # SUBS
    sampled = sample_tokens(key_sample, logits, cfg.temperature, cfg.top_p)
    conf = _confidence(cfg.confidence, key_conf, logits, sampled)

    masked = free_NT & (commit_step < 0)
    in_block = (block_of_T == s // steps_per_block)[None, :]
    n_free = jnp.sum(free_NT & in_block, axis=-1)
    n_done = jnp.sum(free_NT & in_block & ~masked, axis=-1)
    n_target = jnp.round(n_free * frac_S[s % steps_per_block]).astype(jnp.int32)
    commit = _top_k_mask(conf, masked & in_block, n_target - n_done)

    canvas = jnp.where(commit, sampled, canvas)
    commit_step = jnp.where(commit, s, commit_step)
    return (canvas, commit_step), (canvas if cfg.trajectory else None)

  (canvas, commit_step), traj = jax.lax.scan(step, (canvas0, commit0), jnp.arange(cfg.steps))
  return SampleOutput(
      tokens_BGT=canvas.reshape(B, G, T),
      commit_step_BGT=commit_step.reshape(B, G, T),
      canvas_SBGT=None if traj is None else traj.reshape(cfg.steps, B, G, T))


def sample(graphdef, params, context_BC, context_valid_BC, fixed_BT, rng, cfg: SamplerConfig,
           *, num_samples: int, mask_id: int, uncond_valid_BC=None) -> SampleOutput:
  """Draws `num_samples` targets per prompt: tokens [B, G, T].

  `rng` is one key, or [B] keys (one per prompt, see the module docstring);
  `context_BC` is left-padded (pad id 0) and ends with the <target> marker;
  `context_valid_BC` marks its real tokens; `fixed_BT` pins target tokens
  (-1 = free); `uncond_valid_BC` (needed when cfg.cfg_scale > 0) is the valid
  mask without the steer's tokens. Compiled once per (graphdef, cfg, shapes).
  """
  cfg.validate(fixed_BT.shape[1])
  if cfg.cfg_scale > 0 and uncond_valid_BC is None:
    raise ValueError("cfg_scale > 0 needs uncond_valid_BC (the context mask without the steer)")
  if cfg.cfg_scale == 0:
    uncond_valid_BC = None  # guidance off: skip the unconditional forward entirely
  return _sample_jit(graphdef, params, jnp.asarray(context_BC, jnp.int32),
                     jnp.asarray(context_valid_BC, bool), jnp.asarray(fixed_BT, jnp.int32), rng,
                     None if uncond_valid_BC is None else jnp.asarray(uncond_valid_BC, bool),
                     cfg=cfg, num_samples=num_samples, mask_id=mask_id)
