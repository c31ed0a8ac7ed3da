import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from mdlm_wm.model import sharding
from mdlm_wm.model.transformer import (REMAT_POLICIES, ModelConfig, Transformer, attend,
                                       attention_mask)

V = 50


def make(attention="bidirectional", **kw):
  cfg = ModelConfig(vocab_size=V, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=64,
                    attention=attention, **kw)
  with jax.set_mesh(sharding.make_mesh((1, 1, 1), jax.devices()[:1])):
    return Transformer(cfg, rngs=nnx.Rngs(0))


def tokens(B=2, L=12, seed=0):
  return jax.random.randint(jax.random.key(seed), (B, L), 3, V)


def test_param_count_matches_the_formula():
  for tie in (True, False):
    m = make(tie_embeddings=tie)
    n = sum(x.size for x in jax.tree.leaves(nnx.state(m, nnx.Param)))
    assert n == m.cfg.num_params()


def test_causal_logits_ignore_the_future():
  m = make("causal")
  x = tokens()
  y = x.at[:, 8:].set(3)
  np.testing.assert_allclose(m(x)[:, :8], m(y)[:, :8], atol=1e-5)
  assert not np.allclose(m(x)[:, 8:], m(y)[:, 8:])


def test_bidirectional_logits_see_the_future():
  m = make("bidirectional")
  x = tokens()
  assert not np.allclose(m(x)[:, :8], m(x.at[:, 8:].set(3))[:, :8])


def test_packed_segments_do_not_see_each_other():
  m = make("bidirectional")
  x = tokens(B=1, L=12)
  seg = jnp.array([[1] * 5 + [2] * 5 + [0] * 2])
  pos = jnp.array([[0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 0]])
  out = m(x, pos, seg)
  alone = m(x[:, :5], pos[:, :5], seg[:, :5])
  np.testing.assert_allclose(out[:, :5], alone, atol=1e-5)
  changed = m(x.at[:, 5:10].set(7), pos, seg)
  np.testing.assert_allclose(out[:, :5], changed[:, :5], atol=1e-5)
  assert np.all(np.isfinite(out))


def test_prefix_context_ignores_target_and_cache_matches_full_forward():
  m = make("prefix")
  x = tokens()
  target = jnp.zeros_like(x).at[:, 8:].set(1)
  full = m(x, None, None, target)
  other_target = m(x.at[:, 8:].set(5), None, None, target)
  np.testing.assert_allclose(full[:, :8], other_target[:, :8], atol=1e-5)
  cache = m.encode_context(x[:, :8], jnp.ones((2, 8), bool))
  pos = jnp.broadcast_to(jnp.arange(8, 12), (2, 4))
  cached = m.decode_target(x[:, 8:], pos, cache, jnp.ones((2, 4, 12), bool))
  np.testing.assert_allclose(cached, full[:, 8:], atol=1e-4)


def test_attention_over_a_cache_and_slots_equals_attention_over_the_joined_keys():
  keys = jax.random.split(jax.random.key(0), 6)
  q = jax.random.normal(keys[0], (2, 3, 4, 8))  # 4 query heads, 2 kv heads
  k1, v1 = (jax.random.normal(kk, (2, 5, 2, 8)) for kk in keys[1:3])
  k2, v2 = (jax.random.normal(kk, (2, 3, 2, 8)) for kk in keys[3:5])
  mask = jax.random.bernoulli(keys[5], 0.6, (2, 3, 8))
  mask = mask.at[0, 1].set(False)  # a fully masked query row
  mask = mask.at[1, 2, 5:].set(False)  # a row that sees only the cache
  joined = attend(q, [(jnp.concatenate([k1, k2], 1), jnp.concatenate([v1, v2], 1))], mask)
  parts = attend(q, [(k1, v1), (k2, v2)], mask)
  np.testing.assert_allclose(parts, joined, atol=1e-5, rtol=1e-5)


def test_attention_mask_modes():
  seg = jnp.array([[1, 1, 1, 0]])
  tgt = jnp.array([[0, 1, 1, 0]])
  prefix = attention_mask(seg, tgt, "prefix")[0]
  assert not prefix[0, 1] and prefix[1, 0] and prefix[1, 2]  # context never sees target
  causal = attention_mask(seg, tgt, "causal")[0]
  assert causal[2, 1] and not causal[1, 2]
  assert attention_mask(seg, tgt, "bidirectional")[0, 3].tolist() == [False] * 3 + [True]


def test_bf16_compute_keeps_float32_params_and_logits():
  m = make(dtype="bfloat16")
  assert all(x.dtype == jnp.float32 for x in jax.tree.leaves(nnx.state(m, nnx.Param)))
  out = m(tokens())
  assert out.dtype == jnp.float32 and np.all(np.isfinite(out))
  np.testing.assert_allclose(out, make()(tokens()), atol=0.1)


@pytest.mark.parametrize("remat", [*REMAT_POLICIES[1:], True])
def test_remat_gives_the_same_loss_gradient(remat):
  x = tokens()
  grads = []
  for policy in ("none", remat):
    m = make(remat=policy)
    g = nnx.grad(lambda mod: jnp.mean(mod(x) ** 2))(m)
    grads.append(jax.tree.leaves(nnx.state(g, nnx.Param)))
  for a, b in zip(*grads):
    np.testing.assert_allclose(a, b, atol=1e-6)


def test_remat_policy_names_and_legacy_bools():
  assert make(remat=True).cfg.remat == "full" and make(remat=False).cfg.remat == "none"
  assert ModelConfig(**dataclasses.asdict(make(remat=True).cfg)).remat == "full"
  with pytest.raises(ValueError, match="remat: must be one of"):
    ModelConfig(vocab_size=V, remat="sometimes").validate()


def test_config_validation():
  with pytest.raises(ValueError, match="n_kv_heads"):
    ModelConfig(vocab_size=V, n_heads=4, n_kv_heads=3).validate()
  with pytest.raises(ValueError, match="attention"):
    ModelConfig(vocab_size=V, attention="sideways").validate()
