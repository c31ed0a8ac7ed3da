"""Per-token log-probabilities of sampled completions, for GRPO.

Every estimator scores a completion canvas [B, T] after a left-padded context
[B, C] in one layout, the sampler's: tokens [context | canvas], positions
0..C+T-1, padding columns in segment 0 (ignored by attention), the canvas as
target. Arguments are a model object and arrays, so a caller can run them
under `jax.jit` on `nnx.merge(graphdef, params)`.

  * `ar_logprob`: exact log p(y_j | context, y_<j) of a causal model.
  * `mdlm_one_step_logprob` (d1 / diffu-GRPO): one pass with the whole
    completion masked and random context tokens masked. A biased surrogate:
    it scores each token as if it were generated first, not an ELBO.
  * `mdlm_coupled_logprob` (DiffuCoder coupled-GRPO): two passes with
    complementary completion masks, so every counted token is scored exactly
    once, with weights that make sum(weight * logp) an ELBO estimate.
  * `mdlm_elbo`: k-sample Monte-Carlo ELBO for evaluation.
  * `block_coupled_logprob`: the coupled estimate of a block-diffusion
    model, in its training layout (masks within blocks, clean left context).

The MDLM estimators are random: the masks depend only on `rng` and shapes,
never on parameters. Old, new and reference policies must be scored with the
same rng (e.g. `jax.random.fold_in(base_key, iteration)`) so that their masks
coincide and ratios/KL compare like with like; a fresh rng per iteration keeps
the masks from repeating across updates.

Times are drawn in [T_MIN, 1] (coupled: [T_MIN, 1 - T_MIN], so the complement
is bounded away from the singular end too), as in training; the estimators
therefore target the ELBO restricted to those times, which differs from the
full ELBO by O(T_MIN) relative.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from mdlm_wm.data.block_rows import CLEAN, NOISY
from mdlm_wm.diffusion import block, loss
from mdlm_wm.diffusion import schedule as sched

T_MIN = 1e-3


def _forward(model, context_BC, valid_BC, canvas_BT, shift: int = 0):
  """Logits [B, T, V] of [context | canvas] in the sampler's layout, read at the
  canvas columns moved left by `shift` (1 for next-token prediction)."""
  B, C = context_BC.shape
  T = canvas_BT.shape[1]
  tokens = jnp.concatenate([context_BC, canvas_BT], axis=1).astype(jnp.int32)
  positions = jnp.broadcast_to(jnp.arange(C + T), (B, C + T))
  ones = jnp.ones((B, T), jnp.int32)
  segments = jnp.concatenate([valid_BC.astype(jnp.int32), ones], axis=1)
  target = jnp.concatenate([jnp.zeros((B, C), jnp.int32), ones], axis=1)
  hidden = model.hidden(tokens, positions, segments, target)
  return model.logits(hidden[:, C - shift:C + T - shift])


def _gather(logp_BTV, tokens_BT):
  return jnp.take_along_axis(logp_BTV, tokens_BT[..., None], axis=-1)[..., 0]


def _check_attention(model, causal: bool):
  if (model.cfg.attention == "causal") != causal:
    raise ValueError(f"this estimator needs a {'causal' if causal else 'non-causal'} model; "
                     f"got attention={model.cfg.attention!r}")


def _subs_logp(model, context_BC, valid_BC, canvas_BT, completion_BT, mask_id: int):
  """SUBS log-prob [B, T] of each true completion token given the (masked) canvas."""
  _check_attention(model, causal=False)
  logits = _forward(model, context_BC, valid_BC, canvas_BT)
  return _gather(loss.subs_log_probs(logits, mask_id), completion_BT)


def ar_logprob(model, context_BC, valid_BC, completion_BT):
  """Exact log p(y_j | context, y_<j) [B, T] from a causal model, in one pass.

  The logit in column C+j-1 predicts completion token j, so every row needs at
  least one real context token (its last column, as the AR decoder assumes).
  """
  _check_attention(model, causal=True)
  logits = _forward(model, context_BC, valid_BC, completion_BT, shift=1)
  return _gather(jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1), completion_BT)


def mdlm_one_step_logprob(model, context_BC, valid_BC, completion_BT, rng, *, mask_id: int,
                          prompt_mask_rate: float):
  """d1's one-step estimate [B, T]: SUBS log p(y_j | masked context, all-[MASK] canvas).

  Each real context token is masked with probability `prompt_mask_rate`
  (padding never), which makes the ratio depend on rng-chosen context views.
  Biased: this is neither the likelihood nor an ELBO.
  """
  hide = valid_BC & (jax.random.uniform(rng, context_BC.shape) < prompt_mask_rate)
  context = jnp.where(hide, mask_id, context_BC)
  canvas = jnp.full_like(completion_BT, mask_id)
  return _subs_logp(model, context, valid_BC, canvas, completion_BT, mask_id)


def _coupled_pass1(rng, completion_mask_BT, kind: str):
  """A time per row [B] and the pass-1 mask [B, T]: counted tokens masked w.p. 1 - alpha(t)."""
  k_t, k_mask = jax.random.split(rng)
  B, T = completion_mask_BT.shape
  t_B = jax.random.uniform(k_t, (B,), minval=T_MIN, maxval=1.0 - T_MIN)
  p_mask = 1.0 - sched.alpha(t_B[:, None], kind)
  return t_B, completion_mask_BT & (jax.random.uniform(k_mask, (B, T)) < p_mask)


def mdlm_coupled_logprob(model, context_BC, valid_BC, completion_BT, completion_mask_BT, rng, *,
                         mask_id: int, schedule: str = "loglinear"):
  """DiffuCoder's coupled estimate: (logp_BT, weight_BT), both 0 on uncounted tokens.

  Pass 1 masks M (counted tokens, each w.p. q = 1 - alpha(t)); pass 2 masks
  the counted complement of M, i.e. a mask at rate 1 - q = alpha(t); each
  token is scored in the pass that masks it. The ELBO is the integral of
  S(q) / q over the masking rate q, where S(q) is the expected log-prob sum
  of the tokens masked at rate q. Pass 1 estimates it with the usual weight
  -alpha'(t) / (1 - alpha(t)); pass 2 draws its rate q' = alpha(t) with
  density 1 / -alpha'(t) in t, so its weight is -alpha'(t) / alpha(t) (= 1/t'
  for linear and loglinear, where alpha(t') = 1 - alpha(t)). Each pass alone
  is unbiased, hence the 0.5: sum(weight * logp) estimates the ELBO.
  Uncounted completion tokens stay visible in both passes.
  """
  t_B, in1 = _coupled_pass1(rng, completion_mask_BT, schedule)
  in2 = completion_mask_BT & ~in1
  canvas = jnp.concatenate([jnp.where(in1, mask_id, completion_BT),
                            jnp.where(in2, mask_id, completion_BT)])
  two = lambda x: jnp.concatenate([x, x])  # both passes in one forward of 2B rows
  logp1, logp2 = jnp.split(
      _subs_logp(model, two(context_BC), two(valid_BC), canvas, two(completion_BT), mask_id), 2)
  t = t_B[:, None]
  w1 = sched.elbo_weight(t, schedule)
  w2 = -sched.alpha_prime(t, schedule) / sched.alpha(t, schedule)
  logp = jnp.where(in1, logp1, jnp.where(in2, logp2, 0.0))
  weight = 0.5 * jnp.where(in1, w1, jnp.where(in2, w2, 0.0))
  return logp, weight


def mdlm_elbo(model, context_BC, valid_BC, completion_BT, completion_mask_BT, rng, *,
              mask_id: int, num_samples: int, schedule: str = "loglinear"):
  """Monte-Carlo ELBO [B] of the counted completion tokens (nats, <= 0).

  The `num_samples` times of a row are stratified over [T_MIN, 1]; all
  samples run as one forward of num_samples * B rows. Only counted tokens are
  masked and scored; uncounted ones stay visible as given.
  """
  K, B = num_samples, completion_BT.shape[0]
  k_t, k_mask = jax.random.split(rng)
  u_KB = jnp.mod(jax.random.uniform(k_t, (B,)) + jnp.arange(K)[:, None] / K, 1.0)
  t_N1 = (T_MIN + (1.0 - T_MIN) * u_KB).reshape(K * B, 1)
  rep = lambda x: jnp.tile(x, (K, 1))  # row k * B + b is sample k of row b
  canvas, masked = loss.apply_mask(k_mask, rep(completion_BT), rep(completion_mask_BT), t_N1,
                                   mask_id, schedule)
  logp = _subs_logp(model, rep(context_BC), rep(valid_BC), canvas, rep(completion_BT), mask_id)
  terms = jnp.where(masked, sched.elbo_weight(t_N1, schedule) * logp, 0.0)
  return terms.sum(-1).reshape(K, B).mean(0)


def block_coupled_logprob(model, context_BC, valid_BC, completion_BT, completion_mask_BT, rng,
                          *, mask_id: int, block_size: int, shift: bool,
                          causal_clean: bool = False, schedule: str = "loglinear"):
  """The coupled estimate of a block-diffusion model: (logp_BT, weight_BT).

  Scored as the model was trained (diffusion/block.py): each completion in
  a row [context | noisy blocks | clean blocks] under the block mask, so
  every block sees the clean blocks before it (causal inside their block with
  `causal_clean`); one time per block; with the shift, slot j holds token
  j - 1. Pass 1 masks each counted token w.p.
  1 - alpha(t_block), pass 2 the counted complement (weights as in
  `mdlm_coupled_logprob`). A block's last token, never an input of its own
  block under the shift, is scored in both passes with weight 1/2 each (its
  expected weight). Tokens after the first <eot> are invisible and uncounted.
  """
  B, C = context_BC.shape
  T = completion_BT.shape[1]
  b = block_size
  K = -(-T // b)
  pad = K * b - T
  y = jnp.pad(completion_BT, ((0, 0), (0, pad)))
  counted = jnp.pad(completion_mask_BT, ((0, 0), (0, pad)))
  P = C - 1 if shift else C
  j = jnp.arange(K * b)
  k_t, k_mask = jax.random.split(rng)
  t_BK = jax.random.uniform(k_t, (B, K), minval=T_MIN, maxval=1.0 - T_MIN)
  t = jnp.repeat(t_BK, b, axis=1)
  in1 = counted & (jax.random.uniform(k_mask, (B, K * b)) < 1.0 - sched.alpha(t, schedule))
  in2 = counted & ~in1
  # A block's last token, and the last counted one (the tokens after it are invisible).
  ends = (j % b == b - 1)[None, :] | ~jnp.pad(counted[:, 1:], ((0, 0), (0, 1)))
  last = ends & counted if shift else jnp.zeros_like(counted)

  slots = jnp.concatenate([context_BC[:, C - 1:], y[:, :-1]], axis=1) if shift else y
  maskable = (j % b != 0) if shift else jnp.ones(K * b, bool)

  def noisy_inputs(masked):
    holds = jnp.roll(masked, 1, axis=1) if shift else masked
    return jnp.where(maskable[None, :] & holds, mask_id, slots)

  tokens = jnp.concatenate([
      jnp.concatenate([context_BC[:, :P], noisy_inputs(in1), slots], axis=1),
      jnp.concatenate([context_BC[:, :P], noisy_inputs(in2), slots], axis=1)])
  row = lambda *parts: jnp.broadcast_to(jnp.concatenate(parts), (2 * B, P + 2 * K * b))
  role = row(jnp.zeros(P, jnp.int32), jnp.full(K * b, NOISY), jnp.full(K * b, CLEAN))
  blk = row(jnp.full(P, -1), j // b, j // b)
  pos = row(jnp.arange(P), P + j, P + j)
  seg_one = jnp.concatenate([valid_BC[:, :P], counted, counted], axis=1).astype(jnp.int32)
  seg = jnp.concatenate([seg_one, seg_one])
  mask = block.block_attention_mask(seg, role, blk, pos, causal_context=shift,
                                    causal_clean=causal_clean)
  hidden = model.hidden(tokens, pos, seg, None, mask)[:, P:P + K * b]
  logp1, logp2 = jnp.split(_gather(loss.subs_log_probs(model.logits(hidden), mask_id),
                                   jnp.concatenate([y, y])), 2)
  w1 = sched.elbo_weight(t, schedule)
  w2 = -sched.alpha_prime(t, schedule) / sched.alpha(t, schedule)
  logp = jnp.where(last, 0.5 * (logp1 + logp2), jnp.where(in1, logp1, jnp.where(in2, logp2, 0.0)))
  weight = jnp.where(last, 1.0, 0.5 * jnp.where(in1, w1, jnp.where(in2, w2, 0.0)))
  return logp[:, :T], weight[:, :T]
