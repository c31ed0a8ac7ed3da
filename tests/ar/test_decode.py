import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from mdlm_wm.ar.decode import DecodeConfig, decode
from mdlm_wm.model import sharding
from mdlm_wm.model.transformer import ModelConfig, Transformer

V, EOT = 40, 3
B, C, T, G = 2, 12, 16, 3


def tiny_model(attention: str):
  cfg = ModelConfig(vocab_size=V, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=64,
                    attention=attention)
  with jax.set_mesh(sharding.make_mesh((1, 1, 1))):
    return nnx.split(Transformer(cfg, rngs=nnx.Rngs(0)))


@pytest.fixture(scope="module")
def causal_model():
  return tiny_model("causal")


def left_padded(seed: int, pads=(4, 0), C=C):
  tokens = np.asarray(jax.random.randint(jax.random.key(seed), (len(pads), C), 4, V))
  valid = np.arange(C)[None, :] >= np.asarray(pads)[:, None]
  return np.where(valid, tokens, 0).astype(np.int32), valid


def reference_greedy(model, context, valid, fixed):
  """Greedy decoding that re-runs the full causal forward for every token.

  Positions restart at 0 on each row's first real token, as in training.
  """
  graphdef, params = model
  forward = jax.jit(lambda p, *a: nnx.merge(graphdef, p)(*a))
  Bn = context.shape[0]
  pad = C - valid.sum(-1)
  positions = np.arange(C + T)[None, :] - pad[:, None]
  segments = np.concatenate([valid, np.ones((Bn, T), bool)], 1).astype(np.int32)
  target_mask = np.concatenate([np.zeros((Bn, C)), np.ones((Bn, T))], 1).astype(np.int32)
  canvas = np.zeros((Bn, T), np.int32)
  for j in range(T):
    tokens = np.concatenate([context, canvas], 1)
    logits = forward(params, tokens, positions, segments, target_mask)
    canvas[:, j] = np.where(fixed[:, j] >= 0, fixed[:, j], np.argmax(logits[:, C - 1 + j], -1))
  return canvas


def run(model, context, valid, cfg, fixed=None, seed=0, G=G):
  graphdef, params = model
  fixed = None if fixed is None else jnp.asarray(fixed)
  return np.asarray(decode(graphdef, params, context, valid, jax.random.key(seed), cfg,
                           num_samples=G, fixed_BT=fixed))


def test_kv_cache_greedy_equals_full_recompute(causal_model):
  context, valid = left_padded(1)
  free = np.full((B, T), -1, np.int32)
  out = run(causal_model, context, valid, DecodeConfig(T, temperature=0.0))
  assert out.shape == (B, G, T) and out.dtype == np.int32
  ref = reference_greedy(causal_model, context, valid, free)
  np.testing.assert_array_equal(out, np.broadcast_to(ref[:, None], out.shape))
  # The greedy output is not a constant run (the check has teeth).
  assert len(np.unique(ref)) > 2


def test_forced_tokens_appear_and_condition_the_rest(causal_model):
  context, valid = left_padded(2)
  fixed = np.full((B, T), -1, np.int32)
  fixed[0, [0, 7]] = [11, 12]
  fixed[1, [3, T - 1]] = [13, 14]
  cfg = DecodeConfig(T, temperature=0.0)
  out = run(causal_model, context, valid, cfg, fixed)
  pinned = np.broadcast_to(fixed[:, None] >= 0, out.shape)
  np.testing.assert_array_equal(out[pinned], np.broadcast_to(fixed[:, None], out.shape)[pinned])
  # Pins are fed back, so what follows them matches teacher forcing.
  ref = reference_greedy(causal_model, context, valid, fixed)
  np.testing.assert_array_equal(out, np.broadcast_to(ref[:, None], out.shape))
  free_out = run(causal_model, context, valid, cfg)
  assert not np.array_equal(out[0, 0, 1:7], free_out[0, 0, 1:7])


def test_batched_samples_shapes_and_diversity(causal_model):
  context, valid = left_padded(3)
  out = run(causal_model, context, valid, DecodeConfig(T, temperature=1.0, top_p=0.95), G=4)
  assert out.shape == (B, 4, T)
  for b in range(B):
    assert len({tuple(row) for row in out[b]}) == 4
  tiny_p = run(causal_model, context, valid, DecodeConfig(T, temperature=1.0, top_p=1e-6))
  greedy = run(causal_model, context, valid, DecodeConfig(T, temperature=0.0))
  np.testing.assert_array_equal(tiny_p, greedy)


def test_left_padding_invariance(causal_model):
  context, valid = left_padded(4, pads=(0, 2), C=8)
  wide = (np.pad(context, ((0, 0), (C - 8, 0))), np.pad(valid, ((0, 0), (C - 8, 0))))
  cfg = DecodeConfig(T, temperature=0.0)
  np.testing.assert_array_equal(run(causal_model, context, valid, cfg),
                                run(causal_model, *wide, cfg))


def test_eot_stops_the_text(causal_model):
  context, valid = left_padded(5)
  fixed = np.full((B, T), -1, np.int32)
  fixed[0, 5] = EOT
  fixed[1, 9] = 17  # a pin after the end still wins
  fixed[1, 2] = EOT
  out = run(causal_model, context, valid, DecodeConfig(T, temperature=1.0, eot_id=EOT))
  # Whatever was sampled, nothing but <eot> follows the first <eot>.
  for row in out.reshape(-1, T):
    hits = np.flatnonzero(row == EOT)
    if hits.size:
      assert np.all(row[hits[0]:] == EOT)
  out = run(causal_model, context, valid, DecodeConfig(T, temperature=1.0, eot_id=EOT), fixed)
  assert np.all(out[0, :, 5:] == EOT)
  assert np.all(out[1, :, 2:9] == EOT) and np.all(out[1, :, 9] == 17)
  assert np.all(out[1, :, 10:] == EOT)


def test_needs_a_causal_model():
  graphdef, params = tiny_model("prefix")
  context, valid = left_padded(6)
  with pytest.raises(ValueError, match="causal"):
    decode(graphdef, params, context, valid, jax.random.key(0), DecodeConfig(T), num_samples=1)
