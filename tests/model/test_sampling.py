import jax
import jax.numpy as jnp
import numpy as np

from mdlm_wm.model import sampling

EOT = 3


def test_top_p_filter_keeps_the_nucleus():
  logits = jnp.log(jnp.array([[0.5, 0.3, 0.15, 0.05]]))
  kept = np.isfinite(np.asarray(sampling.top_p_filter(logits, 0.7)))
  np.testing.assert_array_equal(kept, [[True, True, False, False]])
  kept = np.isfinite(np.asarray(sampling.top_p_filter(logits, 0.81)))
  np.testing.assert_array_equal(kept, [[True, True, True, False]])


def test_after_first_eot():
  tokens = jnp.array([[5, 6, EOT, 7, EOT, 8], [5, 6, 7, 8, 9, 10], [EOT, 4, 4, 4, 4, 4]])
  np.testing.assert_array_equal(
      sampling.after_first_eot(tokens, EOT),
      [[0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 0], [0, 1, 1, 1, 1, 1]])


def test_row_keys_depend_only_on_their_prompt():
  keys = jnp.stack([jax.random.key(s) for s in (7, 8)])
  alone = sampling.row_keys(keys[:1], 3)
  both = sampling.row_keys(keys, 3)
  assert both.shape == (6,)
  np.testing.assert_array_equal(jax.random.key_data(both[:3]), jax.random.key_data(alone))
  assert not np.array_equal(jax.random.key_data(both[:3]), jax.random.key_data(both[3:]))


def test_sample_tokens_greedy_and_per_row_keys():
  logits = jnp.log(jnp.array([[0.1, 0.9], [0.8, 0.2]]))
  greedy = sampling.sample_tokens(jax.random.key(0), logits, 0.0, 1.0)
  np.testing.assert_array_equal(greedy, [1, 0])
  # A tiny top-p keeps only the most likely token, whatever the key.
  keys = jnp.stack([jax.random.key(s) for s in (1, 2)])
  nucleus = sampling.sample_tokens(keys, logits, 1.0, 1e-6)
  np.testing.assert_array_equal(nucleus, [1, 0])


def test_sample_tokens_follow_the_softmax_and_never_draw_a_banned_token():
  probs = np.array([0.5, 0.3, 0.15, 0.05, 0.0])  # the last id banned (-inf)
  logits = jnp.broadcast_to(jnp.log(jnp.asarray(probs)), (20_000, 5))
  tokens = np.asarray(sampling.sample_tokens(jax.random.key(0), logits, 1.0, 1.0))
  freq = np.bincount(tokens, minlength=5) / tokens.size
  # 4 standard errors of a frequency near 0.5 over 20,000 draws: 0.014.
  np.testing.assert_allclose(freq, probs, atol=0.014)
  assert freq[4] == 0
  # Temperature 2 flattens: p ** (1/2), renormalised.
  tokens = np.asarray(sampling.sample_tokens(jax.random.key(1), logits, 2.0, 1.0))
  flat = np.sqrt(probs) / np.sqrt(probs).sum()
  np.testing.assert_allclose(np.bincount(tokens, minlength=5) / tokens.size, flat, atol=0.014)
  # Top-p 0.7 keeps the first two tokens, in proportion 5 : 3.
  tokens = np.asarray(sampling.sample_tokens(jax.random.key(2), logits, 1.0, 0.7))
  np.testing.assert_allclose(np.bincount(tokens, minlength=5) / tokens.size,
                             [0.625, 0.375, 0, 0, 0], atol=0.014)


def test_sample_tokens_per_row_keys_over_several_axes():
  logits = jax.random.normal(jax.random.key(3), (4, 3, 7))
  keys = jnp.stack([jax.random.key(s) for s in range(4)])
  tokens = np.asarray(sampling.sample_tokens(keys, logits, 1.0, 1.0))
  assert tokens.shape == (4, 3)
  # Row n draws from key n alone.
  alone = np.asarray(sampling.sample_tokens(keys[1:2], logits[1:2], 1.0, 1.0))
  np.testing.assert_array_equal(tokens[1:2], alone)
