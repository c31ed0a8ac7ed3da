"""Masking schedules as pure functions of t in [0, 1].

alpha(t) is the probability that a token is still unmasked at time t
(alpha(0) = 1: clean; alpha(1) ~ 0: all masked). The continuous-time MDLM
ELBO weights the cross-entropy of masked tokens by -alpha'(t) / (1 - alpha(t)).
  * loglinear (default, MDLM): alpha = 1 - (1 - eps) t, weight = 1/t exactly;
  * linear: alpha = 1 - t, weight = 1/t;
  * cosine (md4): alpha = 1 - cos(pi/2 (1 - t)), weight = pi/2 tan(pi/2 (1 - t)).
"""

from __future__ import annotations

import jax.numpy as jnp

SCHEDULES = ("loglinear", "linear", "cosine")
LOGLINEAR_EPS = 1e-3


def alpha(t, kind: str = "loglinear"):
  if kind == "loglinear":
    return 1.0 - (1.0 - LOGLINEAR_EPS) * t
  if kind == "linear":
    return 1.0 - t
  if kind == "cosine":
    return 1.0 - jnp.cos(jnp.pi / 2 * (1.0 - t))
  raise ValueError(f"unknown schedule {kind!r}; expected one of {SCHEDULES}")


def alpha_prime(t, kind: str = "loglinear"):
  """d alpha / dt."""
  if kind == "loglinear":
    return -(1.0 - LOGLINEAR_EPS) * jnp.ones_like(t)
  if kind == "linear":
    return -jnp.ones_like(t)
  if kind == "cosine":
    return -jnp.pi / 2 * jnp.sin(jnp.pi / 2 * (1.0 - t))
  raise ValueError(f"unknown schedule {kind!r}; expected one of {SCHEDULES}")


def elbo_weight(t, kind: str = "loglinear"):
  """-alpha'(t) / (1 - alpha(t)): the continuous-time ELBO weight of a masked token."""
  if kind in ("loglinear", "linear"):
    return 1.0 / t  # exact; avoids 0/0 cancellation near t = 0
  return -alpha_prime(t, kind) / (1.0 - alpha(t, kind))
