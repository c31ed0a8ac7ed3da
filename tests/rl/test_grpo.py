import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mdlm_wm.rl import grpo

REWARDS_2x3 = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 1.0]])


@pytest.mark.parametrize("mode", grpo.ADVANTAGE_MODES)
def test_constant_group_has_exactly_zero_advantage(mode):
  # 0.1 * 3 / 3 != 0.1 in floating point: the zero must not come from the mean.
  adv = grpo.group_advantages(np.array([[0.1, 0.1, 0.1], [0.0, 1.0, 3.0]]), mode=mode)
  assert np.all(adv[0] == 0.0)
  assert np.all(adv[1] != 0.0)


def test_std_advantages_by_hand():
  adv = grpo.group_advantages(REWARDS_2x3, mode="std", eps=0.0)
  std0 = np.sqrt(2 / 3)  # population std of (1, 2, 3)
  std1 = np.sqrt(2) / 3  # population std of (0, 0, 1)
  np.testing.assert_allclose(adv, [[-1 / std0, 0.0, 1 / std0],
                                   [-1 / 3 / std1, -1 / 3 / std1, 2 / 3 / std1]], rtol=1e-6)
  assert adv.dtype == np.float32 and adv.shape == (2, 3)


def test_mean_and_leave_one_out_advantages_by_hand():
  np.testing.assert_allclose(grpo.group_advantages(REWARDS_2x3, mode="mean"),
                             [[-1.0, 0.0, 1.0], [-1 / 3, -1 / 3, 2 / 3]], rtol=1e-6)
  # r_i minus the mean of the other two.
  np.testing.assert_allclose(grpo.group_advantages(REWARDS_2x3, mode="loo"),
                             [[1 - 2.5, 2 - 2.0, 3 - 1.5], [0 - 0.5, 0 - 0.5, 1 - 0.0]],
                             rtol=1e-6)


@pytest.mark.parametrize("bad, match", [
    (np.ones((2, 1)), "G >= 2"),
    (np.ones(4), r"\[B, G\]"),
    (np.array([[0.0, np.nan]]), "finite"),
    (np.array([[0.0, np.inf]]), "finite"),
])
def test_group_advantages_rejects_bad_rewards(bad, match):
  with pytest.raises(ValueError, match=match):
    grpo.group_advantages(bad)


def test_unknown_advantage_mode_names_the_allowed_ones():
  with pytest.raises(ValueError, match="std.*mean.*loo"):
    grpo.group_advantages(REWARDS_2x3, mode="rank")


def test_zero_spread_fraction_on_a_mixed_batch():
  rewards = np.array([[1.0, 1.0, 1.0], [0.0, 1.0, 0.0], [0.5, 0.5, 0.5 + 1e-12], [0.2, 0.3, 0.2]])
  assert grpo.zero_spread_fraction(rewards) == 0.5
  assert grpo.zero_spread_fraction(rewards, tol=0.0) == 0.25


def test_k3_is_nonnegative_and_zero_when_policies_match():
  new, ref = jax.random.normal(jax.random.key(0), (2, 1000)) * 3.0
  k3 = grpo.kl_penalty(new, ref, "k3")
  assert bool(jnp.all(k3 >= 0)) and float(k3.max()) > 0
  assert bool(jnp.all(grpo.kl_penalty(new, new, "k3") == 0))


def test_k1_k2_k3_by_hand():
  new, ref = jnp.array([-1.0, -2.0]), jnp.array([-2.0, -1.0])  # d = ref - new = (-1, 1)
  np.testing.assert_allclose(grpo.kl_penalty(new, ref, "k1"), [1.0, -1.0])
  np.testing.assert_allclose(grpo.kl_penalty(new, ref, "k2"), [0.5, 0.5])
  np.testing.assert_allclose(grpo.kl_penalty(new, ref, "k3"),
                             [np.exp(-1.0) + 1 - 1, np.exp(1.0) - 1 - 1], rtol=1e-6)
  with pytest.raises(ValueError, match="k1"):
    grpo.kl_penalty(new, ref, "k4")


# One sequence of 5 tokens with A = +2 and one with A = -1, eps = 0.2. The
# last token of each row is padding (with a garbage log-prob).
RATIOS = np.array([[1.1, 1.5, 0.5, 1.0, 1.0], [1.1, 1.5, 0.5, 0.7, 1.0]])
MASK = np.array([[1, 1, 1, 1, 0], [1, 1, 1, 1, 0]], np.float32)
ADV = np.array([2.0, -1.0])


def _logps(ratios):
  old = np.full(ratios.shape, -1.5, np.float32)
  new = old + np.log(ratios).astype(np.float32)
  new[:, -1] = 1e4  # exp(new - old) would overflow if padding were not ignored
  return jnp.asarray(new), jnp.asarray(old)


def test_clipped_surrogate_by_hand():
  new, old = _logps(RATIOS)
  loss, clipped = grpo.clipped_surrogate(new, old, ADV, MASK, clip_eps=0.2)
  # A > 0: min(r A, clip(r) A) caps r at 1.2 and keeps r < 0.8 unclipped.
  # A < 0: the min keeps r > 1.2 unclipped and floors r at 0.8.
  np.testing.assert_allclose(loss, [[-2.2, -2.4, -1.0, -2.0, 0.0],
                                    [1.1, 1.5, 0.8, 0.8, 0.0]], rtol=1e-5)
  np.testing.assert_array_equal(clipped, [[False, True, False, False, False],
                                          [False, False, True, True, False]])


def test_grpo_loss_clip_fraction_and_ratio_metrics():
  new, old = _logps(RATIOS)
  loss, m = grpo.grpo_loss(new, old, new, ADV, MASK, clip_eps=0.2, beta=0.1)
  np.testing.assert_allclose(loss, (-2.2 - 2.4 - 1.0 - 2.0 + 1.1 + 1.5 + 0.8 + 0.8) / 8, rtol=1e-5)
  assert float(m["clip_fraction"]) == pytest.approx(3 / 8)
  assert float(m["kl"]) == 0.0  # ref == new
  assert float(m["num_tokens"]) == 8
  assert float(m["ratio_mean"]) == pytest.approx(RATIOS[:, :4].mean(), rel=1e-5)
  assert float(m["ratio_max"]) == pytest.approx(1.5, rel=1e-5)


def test_token_mean_weights_every_token_equally():
  # Sequence 0 has 1 valid token, sequence 1 has 3; ratio 1 so loss = -A.
  logp = jnp.zeros((2, 3))
  mask = jnp.array([[True, False, False], [True, True, True]])
  adv = jnp.array([4.0, 1.0])
  loss, m = grpo.grpo_loss(logp, logp, logp, adv, mask, clip_eps=0.2, beta=0.0)
  # Token mean: (-4 - 1 - 1 - 1) / 4, not the sequence mean (-4 + -1) / 2.
  assert float(loss) == pytest.approx(-7 / 4)
  assert float(m["pg_loss"]) == pytest.approx(-7 / 4)


def test_kl_term_is_in_the_loss_only_when_beta_is_nonzero():
  logp_new = jnp.array([[-1.0, -2.0]])
  logp_ref = jnp.array([[-2.0, -1.0]])
  adv, mask = jnp.zeros(1), jnp.ones((1, 2))
  kl = (np.exp(-1.0) + np.exp(1.0) - 2) / 2
  loss0, m0 = grpo.grpo_loss(logp_new, logp_new, logp_ref, adv, mask, clip_eps=0.2, beta=0.0)
  loss1, m1 = grpo.grpo_loss(logp_new, logp_new, logp_ref, adv, mask, clip_eps=0.2, beta=0.5)
  assert float(loss0) == 0.0
  assert float(m0["kl"]) == pytest.approx(kl, rel=1e-6)
  assert float(loss1) == pytest.approx(0.5 * kl, rel=1e-6)


def test_all_zero_mask_gives_zero_not_nan():
  logp = jnp.full((2, 3), 50.0)
  loss, m = grpo.grpo_loss(logp, -logp, -logp, jnp.ones(2), jnp.zeros((2, 3)),
                           clip_eps=0.2, beta=0.1)
  assert float(loss) == 0.0
  assert all(float(v) == 0.0 for v in m.values()), m


def test_gradient_is_minus_advantage_over_token_count():
  new, old = _logps(np.ones((2, 5)))
  mask = MASK.astype(bool)

  @jax.jit
  def loss_fn(logp_new):
    return grpo.grpo_loss(logp_new, old, old, ADV, mask, clip_eps=0.2, beta=0.0)[0]

  grad = jax.grad(loss_fn)(new)
  expected = np.where(mask, -ADV[:, None] / 8, 0.0)
  np.testing.assert_allclose(grad, expected, rtol=1e-6)


def test_gradient_is_finite_with_kl_and_clipping():
  new, old = _logps(RATIOS)
  grad = jax.grad(lambda x: grpo.grpo_loss(x, old, old - 0.3, ADV, MASK, clip_eps=0.2,
                                           beta=0.1)[0])(new)
  assert bool(jnp.all(jnp.isfinite(grad)))
  # Clipped tokens get only the KL gradient; padding gets none.
  assert float(grad[0, -1]) == 0.0 and float(grad[1, -1]) == 0.0
