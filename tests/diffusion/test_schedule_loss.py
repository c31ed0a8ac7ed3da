import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mdlm_wm.ar.loss import ar_loss
from mdlm_wm.diffusion import loss, schedule

T = jnp.linspace(0.01, 0.99, 50)


@pytest.mark.parametrize("kind", schedule.SCHEDULES)
def test_alpha_endpoints_monotone_and_derivative(kind):
  assert float(schedule.alpha(jnp.float32(0.0), kind)) == pytest.approx(1.0)
  assert float(schedule.alpha(jnp.float32(1.0), kind)) == pytest.approx(0.0, abs=1e-3)
  a = schedule.alpha(T, kind)
  assert np.all(np.diff(np.asarray(a)) < 0)
  numeric = jax.vmap(jax.grad(lambda t: schedule.alpha(t, kind)))(T)
  np.testing.assert_allclose(schedule.alpha_prime(T, kind), numeric, rtol=1e-4)


@pytest.mark.parametrize("kind", schedule.SCHEDULES)
def test_weight_matches_its_definition(kind):
  direct = -schedule.alpha_prime(T, kind) / (1 - schedule.alpha(T, kind))
  np.testing.assert_allclose(schedule.elbo_weight(T, kind), direct, rtol=1e-4)


def test_loglinear_weight_is_one_over_t():
  np.testing.assert_allclose(schedule.elbo_weight(T, "loglinear"), 1 / T, rtol=1e-6)


def test_unknown_schedule():
  with pytest.raises(ValueError, match="unknown schedule"):
    schedule.alpha(T, "sqrt")


def _setup(V=11, B=4, L=64, mask_id=2, seed=0):
  k1, k2, k3 = jax.random.split(jax.random.key(seed), 3)
  tokens = jax.random.randint(k1, (B, L), 3, V)
  eligible = jnp.ones((B, L), bool).at[:, :8].set(False)
  seg = jnp.ones((B, L), jnp.int32)
  t = loss.antithetic_times(k2, seg)
  noisy, is_masked = loss.apply_mask(k3, tokens, eligible, t, mask_id, "loglinear")
  return tokens, eligible, t, noisy, is_masked, V, mask_id


def test_perfect_predictor_has_zero_loss():
  tokens, eligible, t, _, is_masked, V, mask_id = _setup()
  logits = 50.0 * jax.nn.one_hot(tokens, V)
  elbo, m = loss.mdlm_loss(logits, tokens, is_masked, eligible, t, mask_id)
  assert float(elbo) < 1e-6 and float(m["masked_ce"]) < 1e-6


def test_uniform_predictor_costs_log_v_minus_one_per_masked_token():
  tokens, eligible, t, _, is_masked, V, mask_id = _setup()
  logits = jnp.zeros(tokens.shape + (V,))
  _, m = loss.mdlm_loss(logits, tokens, is_masked, eligible, t, mask_id)
  # SUBS removes [MASK] from the support: uniform over V - 1 classes.
  assert float(m["masked_ce"]) == pytest.approx(np.log(V - 1), rel=1e-5)


def test_uniform_predictor_elbo_equals_log_v_in_expectation():
  # E_t[w(t) (1 - alpha(t))] = 1 - eps for loglinear, so the ELBO of a uniform
  # predictor is log(V - 1) nats per token (V - 1: SUBS drops [MASK]).
  V = 11
  vals = []
  for seed in range(20):
    tokens, eligible, t, _, is_masked, _, mask_id = _setup(V=V, B=16, seed=seed)
    elbo, _ = loss.mdlm_loss(jnp.zeros(tokens.shape + (V,)), tokens, is_masked, eligible, t,
                             mask_id)
    vals.append(float(elbo))
  assert np.mean(vals) == pytest.approx(np.log(V - 1), rel=0.05)


def test_only_eligible_tokens_are_masked_and_mask_rate_follows_t():
  tokens, eligible, t, noisy, is_masked, _, mask_id = _setup(B=64, L=256)
  assert not bool(jnp.any(is_masked & ~eligible))
  np.testing.assert_array_equal(noisy[~is_masked], tokens[~is_masked])
  assert bool(jnp.all(noisy[is_masked] == mask_id))
  rate = is_masked[:, 8:].mean(axis=1)
  np.testing.assert_allclose(rate, 1 - schedule.alpha(t[:, 0]), atol=0.12)


def test_antithetic_times_cover_the_interval():
  seg = jnp.ones((16, 4), jnp.int32)
  t = loss.antithetic_times(jax.random.key(3), seg)[:, 0]
  assert np.all((t > 0) & (t <= 1))
  counts = np.histogram(np.asarray(t), bins=4, range=(0, 1))[0]
  np.testing.assert_array_equal(counts, [4, 4, 4, 4])


def test_ar_loss_counts_only_target_tokens_of_the_same_example():
  V = 7
  tokens = jnp.array([[1, 2, 3, 4, 5, 6]])
  target = jnp.array([[0, 0, 1, 1, 0, 1]])
  seg = jnp.array([[1, 1, 1, 1, 2, 2]])
  # Perfect next-token logits except at position 4 -> 5 (a new segment).
  logits = 50.0 * jax.nn.one_hot(jnp.roll(tokens, -1, axis=1), V)
  assert float(ar_loss(logits, tokens, target, seg)) < 1e-6
  uniform = jnp.zeros((1, 6, V))
  assert float(ar_loss(uniform, tokens, target, seg)) == pytest.approx(np.log(V))
