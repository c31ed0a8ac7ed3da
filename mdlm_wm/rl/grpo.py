"""Pure functions of GRPO: group-relative advantages, KL estimators, the loss.

Advantages are computed on host (numpy) from the rewards of B prompts x G
completions; the loss is jax and takes per-token log-probs of the new, old
(rollout-time) and frozen reference policies, however they were estimated.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from mdlm_wm.config import ADVANTAGE_MODES, KL_ESTIMATORS


def _as_groups(rewards_BG) -> np.ndarray:
  rewards = np.asarray(rewards_BG, dtype=np.float64)
  if rewards.ndim != 2:
    raise ValueError(f"rewards must be [B, G], got shape {rewards.shape}")
  if rewards.shape[1] < 2:
    raise ValueError(f"a group needs G >= 2 completions, got G={rewards.shape[1]}")
  if not np.all(np.isfinite(rewards)):
    raise ValueError("rewards must be finite; score failures should be replaced upstream")
  return rewards


def group_advantages(rewards_BG, mode: str = "std", eps: float = 1e-6) -> np.ndarray:
  """Advantages of each completion relative to its group: [B, G] float32.

  std: (r - mean) / (std + eps), population std (GRPO). mean: r - mean (no
  std scaling, Dr. GRPO). loo: r_i minus the mean of the other G - 1 rewards
  (RLOO). A group whose rewards are all equal gets exactly 0 in every mode:
  floating-point error in the mean would otherwise leave ~1e-17 residues that
  the std mode divides by ~eps into spurious signal.
  """
  if mode not in ADVANTAGE_MODES:
    raise ValueError(f"unknown advantage mode {mode!r}; expected one of {ADVANTAGE_MODES}")
  rewards = _as_groups(rewards_BG)
  G = rewards.shape[1]
  mean = rewards.mean(axis=1, keepdims=True)
  if mode == "std":
    adv = (rewards - mean) / (rewards.std(axis=1, keepdims=True) + eps)
  elif mode == "mean":
    adv = rewards - mean
  else:
    adv = rewards - (rewards.sum(axis=1, keepdims=True) - rewards) / (G - 1)
  constant = rewards.max(axis=1) == rewards.min(axis=1)
  adv[constant] = 0.0
  return adv.astype(np.float32)


def zero_spread_fraction(rewards_BG, tol: float = 1e-9) -> float:
  """Fraction of groups whose rewards are all equal (max - min <= tol): they
  carry no learning signal. 0.0 for an empty batch."""
  rewards = _as_groups(rewards_BG)
  if not len(rewards):
    return 0.0
  return float(np.mean(rewards.max(axis=1) - rewards.min(axis=1) <= tol))


def kl_penalty(logp_new, logp_ref, kind: str = "k3"):
  """Per-token estimate of KL(new || ref) from samples of the new policy.

  With d = logp_ref - logp_new: k1 = -d (unbiased, can be negative), k2 =
  d^2 / 2 (biased, low variance), k3 = exp(d) - d - 1 (Schulman's unbiased
  and always >= 0 estimator; the default).
  """
  d = logp_ref - logp_new
  if kind == "k1":
    return -d
  if kind == "k2":
    return 0.5 * jnp.square(d)
  if kind == "k3":
    # expm1 keeps precision for small d and gives exactly 0 at d == 0.
    return jnp.expm1(d) - d
  raise ValueError(f"unknown KL estimator {kind!r}; expected one of {KL_ESTIMATORS}")


def _valid(mask_NT):
  # Any nonzero entry is a valid token, so float and bool masks behave alike.
  return jnp.asarray(mask_NT) != 0


def _ratio(logp_new_NT, logp_old_NT, valid_NT):
  # Invalid positions may hold padding garbage: zero the log-ratio there
  # before exp so that neither the value nor the gradient can become
  # inf * 0 = NaN.
  return jnp.exp(jnp.where(valid_NT, logp_new_NT - logp_old_NT, 0.0))


def clipped_surrogate(logp_new_NT, logp_old_NT, advantages_N, mask_NT, clip_eps: float):
  """PPO clipped surrogate per token; returns (loss_NT, clipped_NT).

  loss = -min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A), ratio =
  exp(new - old), A the sequence's advantage. clipped marks tokens where the
  clipped branch is the active one (ratio above 1 + eps with A > 0, or below
  1 - eps with A < 0), i.e. tokens that get no gradient. Both are 0/False at
  invalid tokens.
  """
  valid = _valid(mask_NT)
  ratio = _ratio(logp_new_NT, logp_old_NT, valid)
  adv = jnp.asarray(advantages_N)[:, None]
  objective = jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - clip_eps, 1 + clip_eps) * adv)
  clipped = ((ratio > 1 + clip_eps) & (adv > 0)) | ((ratio < 1 - clip_eps) & (adv < 0))
  return jnp.where(valid, -objective, 0.0), clipped & valid


def grpo_loss(logp_new_NT, logp_old_NT, logp_ref_NT, advantages_N, mask_NT, *,
              clip_eps: float, beta: float, kl_kind: str = "k3"):
  """The GRPO loss over N sequences of T tokens: (scalar loss, metrics).

  Token-mean aggregation (DAPO): the per-token surrogate + beta * KL is
  summed over every valid token of the batch and divided by the batch's
  number of valid tokens. Averaging within each sequence first (the original
  GRPO) would weight every token by 1/length of its completion, so long
  completions would be down-weighted against short ones.

  `clip_eps`, `beta` and `kl_kind` are Python constants (static under jit).
  With beta == 0 the KL term is left out of the loss but still reported.
  Metrics (float32 scalars): pg_loss and kl (token means), clip_fraction,
  ratio_mean and ratio_max over valid tokens, num_tokens. A mask with no
  valid token gives loss 0 and zero metrics.
  """
  valid = _valid(mask_NT)
  num_tokens = jnp.sum(valid, dtype=jnp.float32)
  denom = jnp.maximum(num_tokens, 1.0)

  def token_mean(x_NT):
    return jnp.sum(jnp.where(valid, x_NT, 0.0)) / denom

  pg_NT, clipped_NT = clipped_surrogate(logp_new_NT, logp_old_NT, advantages_N, valid, clip_eps)
  # Zeroed at invalid tokens for the same reason as the log-ratio (exp in k3).
  kl_NT = kl_penalty(jnp.where(valid, logp_new_NT, 0.0), jnp.where(valid, logp_ref_NT, 0.0),
                     kl_kind)
  pg_loss, kl = token_mean(pg_NT), token_mean(kl_NT)
  loss = pg_loss + beta * kl if beta != 0 else pg_loss
  ratio_NT = jnp.where(valid, _ratio(logp_new_NT, logp_old_NT, valid), 0.0)
  metrics = {
      "pg_loss": pg_loss,
      "kl": kl,
      "clip_fraction": token_mean(clipped_NT.astype(jnp.float32)),
      "ratio_mean": token_mean(ratio_NT),
      # Ratios are positive, so the 0 at invalid tokens never wins the max.
      "ratio_max": jnp.max(ratio_NT),
      "num_tokens": num_tokens,
  }
  return loss, metrics
