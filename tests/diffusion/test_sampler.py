import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from mdlm_wm.diffusion import sampler
from mdlm_wm.diffusion.sampler import SamplerConfig
from mdlm_wm.model import sharding
from mdlm_wm.model.transformer import ModelConfig, Transformer

V, MASK, EOT = 40, 2, 3
B, C, T, G = 2, 12, 16, 3
BASE = SamplerConfig(steps=8, temperature=1.0)
# Every option at once (shared by two tests, so compiled once per path).
ALL_ON = dataclasses.replace(BASE, block_size=4, confidence="margin", cfg_scale=1.5,
                             temperature=0.7, top_p=0.9)


def tiny_model(attention: str, seed: int = 0):
  cfg = ModelConfig(vocab_size=V, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=64,
                    attention=attention)
  with jax.set_mesh(sharding.make_mesh((1, 1, 1))):
    return nnx.split(Transformer(cfg, rngs=nnx.Rngs(seed)))


@pytest.fixture(scope="module")
def prefix_model():
  return tiny_model("prefix")


@pytest.fixture(scope="module")
def bidir_model():
  return tiny_model("bidirectional")


def left_padded(seed: int, pads=(3, 0), C=C):
  """A context batch: random real tokens right-aligned, row b with pads[b] pads."""
  tokens = np.asarray(jax.random.randint(jax.random.key(seed), (len(pads), C), 4, V))
  valid = np.arange(C)[None, :] >= np.asarray(pads)[:, None]
  return np.where(valid, tokens, 0).astype(np.int32), valid


def free_canvas(B=B):
  return np.full((B, T), -1, np.int32)


def random_fixed(seed: int):
  """Random pins (about a third of the canvas), always including the last positions."""
  rng = np.random.default_rng(seed)
  fixed = np.where(rng.random((B, T)) < 0.3, rng.integers(4, V, (B, T)), -1)
  fixed[:, -2:] = rng.integers(4, V, (B, 2))
  fixed[1, -1] = EOT
  return fixed.astype(np.int32)


def run(model, cfg, fixed=None, seed=0, ctx=None, uncond=None, G=G):
  graphdef, params = model
  context, valid = ctx if ctx is not None else left_padded(1)
  fixed = free_canvas() if fixed is None else fixed
  out = sampler.sample(graphdef, params, context, valid, fixed, jax.random.key(seed), cfg,
                       num_samples=G, mask_id=MASK, uncond_valid_BC=uncond)
  return jax.tree.map(np.asarray, out)


def check_invariants(out, fixed, steps):
  tokens, commit = out.tokens_BGT, out.commit_step_BGT
  assert tokens.shape == commit.shape == (B, G, T) and tokens.dtype == np.int32
  assert not np.any(tokens == MASK)
  pinned = np.broadcast_to(fixed[:, None, :] >= 0, tokens.shape)
  np.testing.assert_array_equal(tokens[pinned], np.broadcast_to(fixed[:, None], tokens.shape)[pinned])
  assert np.all(commit[pinned] == -1)
  assert np.all((commit[~pinned] >= 0) & (commit[~pinned] < steps))


# "entropy" and "margin" run in the trajectory and all-options tests.
@pytest.mark.parametrize("confidence", ["top1", "random"])
def test_shapes_no_mask_and_pins_kept(prefix_model, confidence):
  cfg = dataclasses.replace(BASE, confidence=confidence)
  for seed in range(4):
    fixed = random_fixed(seed)
    check_invariants(run(prefix_model, cfg, fixed, seed=seed), fixed, cfg.steps)


def test_left_to_right_commits_in_position_order(prefix_model):
  cfg = dataclasses.replace(BASE, steps=T, confidence="left_to_right")
  out = run(prefix_model, cfg, free_canvas())
  np.testing.assert_array_equal(out.commit_step_BGT, np.broadcast_to(np.arange(T), (B, G, T)))
  fixed = free_canvas()
  fixed[:, 3] = 9  # a pin is skipped: the positions after it move up one step
  out = run(prefix_model, dataclasses.replace(cfg, steps=T - 1), fixed)
  expected = np.concatenate([np.arange(3), [-1], np.arange(3, T - 1)])
  np.testing.assert_array_equal(out.commit_step_BGT, np.broadcast_to(expected, (B, G, T)))


def test_pins_kept_with_blocks_guidance_and_cache(prefix_model):
  context, valid = left_padded(1)
  uncond = valid.copy()
  uncond[:, -5:-2] = False
  cfg = dataclasses.replace(ALL_ON, use_prefix_cache=True)
  for seed in range(3):
    fixed = random_fixed(10 + seed)
    out = run(prefix_model, cfg, fixed, seed=seed, ctx=(context, valid), uncond=uncond)
    check_invariants(out, fixed, cfg.steps)


def test_trajectory_commits_once_and_never_changes(prefix_model):
  cfg = dataclasses.replace(BASE, trajectory=True, confidence="entropy")
  fixed = random_fixed(3)
  out = run(prefix_model, cfg, fixed)
  check_invariants(out, fixed, cfg.steps)
  traj, final, commit = out.canvas_SBGT, out.tokens_BGT, out.commit_step_BGT
  assert traj.shape == (cfg.steps, B, G, T)
  for s in range(cfg.steps):
    known = (commit <= s)  # pins have -1: known from the start
    expected = np.where(known, final, MASK)
    np.testing.assert_array_equal(traj[s], expected, err_msg=f"step {s}")


def expected_cumulative(kind, steps):
  """Committed fraction after each step, from the schedules' closed forms."""
  u = np.arange(1, steps + 1) / steps  # 1 - t
  if kind == "cosine":
    return 1 - np.cos(np.pi / 2 * u)
  return u  # linear and (normalised) log-linear: masked fraction = t


@pytest.mark.parametrize("kind", ["loglinear", "cosine"])
def test_commits_per_step_follow_schedule(prefix_model, kind):
  steps = 6
  cfg = dataclasses.replace(BASE, steps=steps, schedule=kind)
  fixed = free_canvas()
  fixed[1, :5] = 9  # rows with different numbers of free positions (16 and 11)
  out = run(prefix_model, cfg, fixed)
  n_free = (fixed < 0).sum(-1)
  # float32 like the sampler: row 1 hits an exact half (11 * 0.5) that float64's
  # cos(pi/3) = 0.5000000000000001 would round the other way.
  frac = expected_cumulative(kind, steps).astype(np.float32)
  cum = np.round(n_free[:, None].astype(np.float32) * frac[None, :]).astype(int)
  expected = np.diff(cum, prepend=0)  # B x steps
  counts = np.stack([(out.commit_step_BGT == s).sum(-1) for s in range(steps)], -1)  # B G S
  np.testing.assert_array_equal(counts, np.broadcast_to(expected[:, None], counts.shape))
  if kind == "cosine":  # not uniform: the schedule, not a constant rate, sets k
    assert len(set(expected[0])) > 1


def test_committed_fraction_ends_at_one_and_grows():
  for kind in ("loglinear", "linear", "cosine"):
    frac = sampler.committed_fraction(7, kind)
    assert frac[-1] == 1.0 and np.all(np.diff(frac) >= 0)
    np.testing.assert_allclose(frac, expected_cumulative(kind, 7), atol=1e-6)


def test_prefix_cache_logits_match_full_path(prefix_model):
  graphdef, params = prefix_model
  context, valid = left_padded(2, pads=(5, 0))
  uncond = valid.copy()
  uncond[:, -4:-1] = False
  valid_VBC = jnp.stack([valid, uncond])
  canvas = np.array(jax.random.randint(jax.random.key(3), (B * G, T), 4, V))
  canvas[:, ::3] = MASK


  @jax.jit
  def logits(params, views, scale):
    cfg = lambda cache: dataclasses.replace(BASE, use_prefix_cache=cache, cfg_scale=scale)
    model = nnx.merge(graphdef, params)
    return [sampler._logits_fn(model, cfg(c), jnp.asarray(context), views, G)(canvas)
            for c in (False, True)]

  for scale, views in ((0.0, valid_VBC[:1]), (2.0, valid_VBC)):
    full, cached = logits(params, views, scale)
    assert full.shape == (B * G, T, V)
    np.testing.assert_allclose(cached, full, atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("base", [BASE, ALL_ON], ids=["plain", "all_options"])
def test_prefix_cache_samples_match_full_path(prefix_model, base):
  context, valid = left_padded(4)
  uncond = valid.copy()
  uncond[:, -4:-1] = False
  fixed = random_fixed(5)
  outs = [run(prefix_model, dataclasses.replace(base, use_prefix_cache=c), fixed,
              seed=7, ctx=(context, valid), uncond=uncond) for c in (False, True)]
  np.testing.assert_array_equal(outs[0].tokens_BGT, outs[1].tokens_BGT)
  np.testing.assert_array_equal(outs[0].commit_step_BGT, outs[1].commit_step_BGT)


def test_prefix_cache_needs_prefix_attention(bidir_model):
  with pytest.raises(ValueError, match="prefix"):
    run(bidir_model, dataclasses.replace(BASE, use_prefix_cache=True))


def test_greedy_is_deterministic_and_ignores_rng(bidir_model):
  cfg = dataclasses.replace(BASE, temperature=0.0)
  a, b = run(bidir_model, cfg, seed=0), run(bidir_model, cfg, seed=123)
  np.testing.assert_array_equal(a.tokens_BGT, b.tokens_BGT)
  np.testing.assert_array_equal(a.commit_step_BGT, b.commit_step_BGT)
  # All G greedy samples of a prompt coincide.
  assert np.all(a.tokens_BGT == a.tokens_BGT[:, :1])


def test_samples_differ_with_temperature(bidir_model):
  out = run(bidir_model, BASE, G=4)
  for b in range(B):
    assert len({tuple(row) for row in out.tokens_BGT[b]}) == 4
  other = run(bidir_model, BASE, G=4, seed=1)
  assert not np.array_equal(out.tokens_BGT, other.tokens_BGT)


def test_tiny_top_p_is_greedy(bidir_model):
  greedy = run(bidir_model, dataclasses.replace(BASE, temperature=0.0))
  nucleus = run(bidir_model, dataclasses.replace(BASE, temperature=1.0, top_p=1e-6), seed=5)
  np.testing.assert_array_equal(greedy.tokens_BGT, nucleus.tokens_BGT)


def test_guidance(prefix_model):
  context, valid = left_padded(6)
  uncond = valid.copy()
  uncond[:, -6:-1] = False
  greedy = dataclasses.replace(BASE, temperature=0.0)
  plain = run(prefix_model, greedy, ctx=(context, valid))
  # Scale 0 ignores the unconditional mask.
  off = run(prefix_model, greedy, ctx=(context, valid), uncond=uncond)
  np.testing.assert_array_equal(plain.tokens_BGT, off.tokens_BGT)
  # uncond == cond: guided = cond exactly, whatever the scale.
  same = run(prefix_model, dataclasses.replace(greedy, cfg_scale=3.0), ctx=(context, valid),
             uncond=valid)
  np.testing.assert_array_equal(plain.tokens_BGT, same.tokens_BGT)
  # A real unconditional view with a large scale moves the samples.
  steered = run(prefix_model, dataclasses.replace(greedy, cfg_scale=50.0), ctx=(context, valid),
                uncond=uncond)
  assert not np.array_equal(plain.tokens_BGT, steered.tokens_BGT)
  with pytest.raises(ValueError, match="uncond_valid_BC"):
    run(prefix_model, dataclasses.replace(greedy, cfg_scale=1.0), ctx=(context, valid))


def test_left_padding_invariance(prefix_model):
  cfg = dataclasses.replace(BASE, temperature=0.0, use_prefix_cache=True)
  context, valid = left_padded(8, pads=(0, 0))
  wide = (np.pad(context, ((0, 0), (5, 0))), np.pad(valid, ((0, 0), (5, 0))))
  for c in (False, True):
    cfg = dataclasses.replace(cfg, use_prefix_cache=c)
    a = run(prefix_model, cfg, ctx=(context, valid))
    b = run(prefix_model, cfg, ctx=wide)
    np.testing.assert_array_equal(a.tokens_BGT, b.tokens_BGT)


def test_semi_autoregressive_blocks_go_left_to_right(prefix_model):
  cfg = dataclasses.replace(BASE, block_size=4, steps=8)
  fixed = random_fixed(2)
  out = run(prefix_model, cfg, fixed)
  check_invariants(out, fixed, cfg.steps)
  commit = out.commit_step_BGT
  for blk in range(T // 4):
    c = commit[..., blk * 4:(blk + 1) * 4]
    free = c >= 0
    # Block i gets steps 2i and 2i + 1 (steps * block_size / T = 2 each).
    assert np.all(c[free] // 2 == blk)


def test_invalid_configs(prefix_model):
  with pytest.raises(ValueError, match="block_size"):
    run(prefix_model, dataclasses.replace(BASE, block_size=5))
  with pytest.raises(ValueError, match="multiple"):
    run(prefix_model, dataclasses.replace(BASE, block_size=4, steps=6))
  with pytest.raises(ValueError, match="confidence"):
    run(prefix_model, dataclasses.replace(BASE, confidence="max"))


def test_repeated_calls_do_not_recompile(prefix_model):
  cfg = dataclasses.replace(BASE, steps=4)
  run(prefix_model, cfg, seed=0)
  before = sampler._sample_jit._cache_size()
  run(prefix_model, cfg, random_fixed(1), seed=1)
  assert sampler._sample_jit._cache_size() == before
