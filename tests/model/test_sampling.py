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
