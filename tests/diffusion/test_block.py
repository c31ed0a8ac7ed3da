"""Block diffusion: rows, the attention mask, the objective's AR limit, and
the KV-cached block sampler against recomputing everything."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from mdlm_wm.ar.loss import ar_loss
from mdlm_wm.data import block_rows
from mdlm_wm.diffusion import block, block_sampler
from mdlm_wm.diffusion.block_sampler import BlockSamplerConfig
from mdlm_wm.model import sharding
from mdlm_wm.model.transformer import ModelConfig, Transformer
from mdlm_wm.train import objectives

V, MASK, EOT = 40, 2, 3
OBJECTIVE = objectives.ObjectiveConfig("mdlm", mask_id=MASK, schedule="loglinear",
                                       steer_drop_rate=0.0, shift=True, t_min=1e-3, t_max=1.0)


def tiny_model(seed=0):
  cfg = ModelConfig(vocab_size=V, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=64,
                    attention="bidirectional")
  with jax.set_mesh(sharding.make_mesh((1, 1, 1), jax.devices()[:1])):
    return Transformer(cfg, rngs=nnx.Rngs(seed))


@pytest.fixture(scope="module")
def model():
  return tiny_model()


def as_batch(row):
  batch = {k: jnp.asarray(v)[None] for k, v in row.items()}
  batch["positions"] = batch.pop("pos")
  batch["segment_ids"] = jnp.ones_like(batch["tokens"])
  return batch


def test_mask_hand_worked_target_of_8_blocks_of_2():
  # Context of 3 tokens c0 c1 M (M: the <target> marker), target x0..x7 with
  # the shift: noisy slots [M x0 | x1 x2 | x3 x4 | x5 x6], clean copy of the
  # first three blocks (nothing attends to the last clean block).
  row = block_rows.block_row([10, 11, 12], list(range(20, 28)), 2, shift=True)
  np.testing.assert_array_equal(row["tokens"],
                                [10, 11, 12, 20, 21, 22, 23, 24, 25, 26, 12, 20, 21, 22, 23, 24])
  np.testing.assert_array_equal(row["labels"][2:10], list(range(20, 28)))
  np.testing.assert_array_equal(row["pos"], [0, 1] + list(range(2, 10)) + list(range(2, 8)))
  np.testing.assert_array_equal(row["maskable"][2:10], [0, 1] * 4)
  np.testing.assert_array_equal(row["last"][2:10], [0, 1] * 4)
  m = np.asarray(block.block_attention_mask(
      jnp.ones((1, 16), jnp.int32), jnp.asarray(row["role"])[None],
      jnp.asarray(row["block"])[None], jnp.asarray(row["pos"])[None], True))[0].astype(int)
  C, N, K = [0, 1], list(range(2, 10)), list(range(10, 16))
  expect = np.zeros((16, 16), int)
  expect[0, 0] = 1
  expect[1, :2] = 1  # the context is causal
  for i, q in enumerate(N):  # noisy block k: context, clean blocks < k, itself
    k = i // 2
    expect[q, C] = 1
    expect[q, K[:2 * k]] = 1
    expect[q, N[2 * k:2 * k + 2]] = 1
  for i, q in enumerate(K):  # clean block k: context, clean blocks <= k
    k = i // 2
    expect[q, C] = 1
    expect[q, K[:2 * k + 2]] = 1
  np.testing.assert_array_equal(m, expect)


def _mask_of(row, future_keep=None, causal_clean=False):
  return np.asarray(block.block_attention_mask(
      jnp.ones((1, len(row["tokens"])), jnp.int32), jnp.asarray(row["role"])[None],
      jnp.asarray(row["block"])[None], jnp.asarray(row["pos"])[None], True,
      future_keep_BLL=future_keep, causal_clean=causal_clean))[0]


def test_causal_clean_copy_is_whole_labelled_and_closes_only_clean_future_keys():
  row = block_rows.block_row([10, 11, 12], list(range(20, 28)), 4, shift=True,
                             clean_labels=True)
  role, pos = row["role"], row["pos"]
  clean = np.nonzero(role == block_rows.CLEAN)[0]
  # The clean copy holds every block (the last too) and, shifted, labels its slots.
  np.testing.assert_array_equal(row["tokens"][clean], [12] + list(range(20, 27)))
  np.testing.assert_array_equal(row["labels"][clean], list(range(20, 28)))
  full, causal = _mask_of(row), _mask_of(row, causal_clean=True)
  closed = full & ~causal
  assert not (causal & ~full).any()
  for q, k in zip(*np.nonzero(closed)):
    assert role[q] == role[k] == block_rows.CLEAN and pos[k] > pos[q]
  assert closed.sum() == 6 * 2  # 2 clean blocks of 4: 6 future pairs each
  # A clean slot now sees exactly what the AR sees at its position.
  for q in clean:
    np.testing.assert_array_equal(np.nonzero(causal[q])[0],
                                  [k for k in range(len(pos)) if role[k] != block_rows.NOISY
                                   and pos[k] <= pos[q]])


def test_annealing_closes_only_in_block_future_keys():
  row = block_rows.block_row([10, 11, 12], list(range(20, 28)), 4, shift=True)
  full = _mask_of(row)
  L = len(row["tokens"])
  np.testing.assert_array_equal(_mask_of(row, jnp.ones((1, L, L), bool)), full)
  causal = _mask_of(row, jnp.zeros((1, L, L), bool))
  pos, role, blk = row["pos"], row["role"], row["block"]
  closed = full & ~causal
  # Exactly the keys after their query inside the same block of the same copy.
  for q, k in zip(*np.nonzero(closed)):
    assert role[q] == role[k] != block_rows.CONTEXT and blk[q] == blk[k] and pos[k] > pos[q]
  # Blocks of 4 with two copies: each full block has 6 (q, k) pairs with k
  # after q; the noisy copy has 2 blocks, the clean copy 1 (the last is cut).
  assert closed.sum() == 6 * 3
  # With every in-block future key closed, a noisy slot sees what an AR sees.
  noisy = np.nonzero(role == block_rows.NOISY)[0]
  for q in noisy:
    assert not causal[q, noisy[pos[noisy] > pos[q]]].any()


def test_anneal_ratio_opens_linearly_and_the_loss_needs_the_step(model):
  np.testing.assert_allclose(objectives.anneal_ratio(jnp.asarray([0, 25, 100, 400]), 100),
                             [0.0, 0.25, 1.0, 1.0])
  cfg = dataclasses.replace(OBJECTIVE, anneal_steps=100)
  row = block_rows.block_row([10, 11, 12], list(range(20, 28)), 4, shift=True)
  batch = as_batch(row)
  rng = jax.random.key(0)
  at_end, _ = objectives.loss_fn(model, batch, rng, cfg, train=True, step=100)
  plain, _ = objectives.loss_fn(model, batch, rng, OBJECTIVE, train=True)
  assert float(at_end) == pytest.approx(float(plain), rel=1e-6)  # fully open = no annealing
  at_start, _ = objectives.loss_fn(model, batch, rng, cfg, train=True, step=0)
  assert float(at_start) != pytest.approx(float(plain), rel=1e-4)
  with pytest.raises(ValueError, match="anneal_steps"):
    objectives.loss_fn(model, batch, rng, cfg, train=True)


def test_b1_with_shift_is_the_ar_loss(model):
  rng = np.random.default_rng(0)
  ctx, tgt = list(rng.integers(5, V, 10)), list(rng.integers(5, V, 7)) + [EOT]
  tokens = jnp.asarray([ctx + tgt])
  tmask = jnp.asarray([[0] * len(ctx) + [1] * len(tgt)])
  # The AR objective on a causal mask, with SUBS's [MASK] class removed as the
  # MDLM's log-probs remove it (the only difference; an AR start puts ~no mass there).
  seg = jnp.ones_like(tokens)
  causal_mask = jnp.tril(jnp.ones((tokens.shape[1],) * 2, bool))[None]
  logits = model(tokens, None, seg, None, causal_mask).at[..., MASK].set(-1e30)
  want = ar_loss(logits, tokens, tmask, seg)
  cfg = OBJECTIVE
  for seed in range(3):  # no randomness is left at b = 1: every draw gives the AR loss
    got, _ = objectives.loss_fn(model, as_batch(block_rows.block_row(ctx, tgt, 1, True)),
                                jax.random.key(seed), cfg)
    np.testing.assert_allclose(float(got), float(want), rtol=1e-5)


def test_clean_copy_next_token_loss_is_the_ar_loss(model):
  rng = np.random.default_rng(1)
  ctx, tgt = list(rng.integers(5, V, 10)), list(rng.integers(5, V, 9)) + [EOT]
  tokens = jnp.asarray([ctx + tgt])
  seg = jnp.ones_like(tokens)
  causal_mask = jnp.tril(jnp.ones((tokens.shape[1],) * 2, bool))[None]
  logits = model(tokens, None, seg, None, causal_mask).at[..., MASK].set(-1e30)
  want = ar_loss(logits, tokens, jnp.asarray([[0] * len(ctx) + [1] * len(tgt)]), seg)
  cfg = dataclasses.replace(OBJECTIVE, clean_ar_weight=0.5)
  batch = as_batch(block_rows.block_row(ctx, tgt, 4, True, clean_labels=True))
  total, m = objectives.loss_fn(model, batch, jax.random.key(0), cfg)
  np.testing.assert_allclose(float(m["clean_ar"]), float(want), rtol=1e-5)
  np.testing.assert_allclose(float(total), float(m["loss"]) + 0.5 * float(want), rtol=1e-5)


def test_loss_counts_target_tokens_up_to_eot_only(model):
  ctx, tgt = [5, 6, 7, 8], [9, 10, 11, EOT]
  cfg = OBJECTIVE
  batch = as_batch(block_rows.block_row(ctx, tgt, 2, True))
  # Labels are exactly the target: 4 of them, whatever follows in the row.
  assert int((batch["role"] == block_rows.NOISY).sum()) == 4
  loss, m = objectives.loss_fn(model, batch, jax.random.key(0), cfg)
  assert np.isfinite(float(loss)) and 0 <= float(m["masked_fraction"]) <= 1


def context(seed, B=2, C=12, pads=(3, 0)):
  rng = np.random.default_rng(seed)
  ctx = rng.integers(5, V, (B, C)).astype(np.int32)
  valid = np.ones((B, C), bool)
  for b, p in enumerate(pads):
    ctx[b, :p], valid[b, :p] = 0, False
  return ctx, valid


@pytest.mark.parametrize("shift,causal_clean", [(True, False), (False, False), (True, True)])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_cached_sampler_equals_recomputing(model, shift, causal_clean, temperature):
  g, p = nnx.split(model)
  ctx, valid = context(1)
  fixed = -np.ones((2, 16), np.int32)
  cfg = BlockSamplerConfig(block_size=4, steps=4, temperature=temperature, shift=shift,
                           causal_clean=causal_clean)
  args = (g, p, ctx, valid, fixed, jax.random.key(1))
  kw = dict(num_samples=2, mask_id=MASK, eot_id=EOT)
  cached = block_sampler.sample(*args, cfg, **kw)
  recomputed = block_sampler.sample(*args, dataclasses.replace(cfg, kv_cache=False), **kw)
  np.testing.assert_array_equal(cached[0], recomputed[0])
  assert not np.any(np.asarray(cached[0]) == MASK)


def test_pins_are_kept_and_text_cannot_end_before_a_trailing_anchor(model):
  g, p = nnx.split(model)
  ctx, valid = context(2)
  fixed = -np.ones((2, 16), np.int32)
  fixed[1, 10:13] = [7, 8, 9]  # a trailing anchor, then the pinned end
  fixed[1, 13:] = EOT
  # A model that would end the text at once: <eot> is its favourite token.
  params = jax.tree.map(lambda x: x, nnx.state(model))
  emb = params["embed"]["embedding"]
  emb[...] = emb[...].at[EOT].multiply(50.0)
  for temperature in (0.0, 1.0):
    tokens, commit, _ = block_sampler.sample(
        g, params, ctx, valid, fixed, jax.random.key(3),
        BlockSamplerConfig(block_size=4, steps=4, temperature=temperature),
        num_samples=3, mask_id=MASK, eot_id=EOT)
    tokens = np.asarray(tokens)
    np.testing.assert_array_equal(tokens[1, :, 10:], np.broadcast_to([7, 8, 9] + [EOT] * 3,
                                                                     (3, 6)))
    assert not np.any(tokens[1, :, :10] == EOT)
    assert np.all(np.asarray(commit)[1, :, 10:] == -1)


def test_decoding_stops_after_the_block_that_holds_eot(model):
  g, p = nnx.split(model)
  ctx, valid = context(4)
  fixed = -np.ones((2, 32), np.int32)
  fixed[:, 5] = EOT  # every row's text ends in block 1 (of 8)
  tokens, _, blocks = block_sampler.sample(
      g, p, ctx, valid, fixed, jax.random.key(0), BlockSamplerConfig(block_size=4, steps=2),
      num_samples=2, mask_id=MASK, eot_id=EOT)
  assert int(blocks) == 2
  # Blocks never decoded read as <eot>.
  assert np.all(np.asarray(tokens)[:, :, 8:] == EOT)


def test_threshold_commits_several_labels_per_step(model):
  g, p = nnx.split(model)
  ctx, valid = context(5)
  fixed = -np.ones((2, 8), np.int32)
  kw = dict(num_samples=1, mask_id=MASK, eot_id=EOT)
  _, commit, _ = block_sampler.sample(g, p, ctx, valid, fixed, jax.random.key(0),
                                      BlockSamplerConfig(block_size=8, steps=8, threshold=0.01,
                                                         temperature=0.0), **kw)
  # Every label clears a 1% threshold on a 40-token vocabulary: one step.
  assert np.asarray(commit).max() == 0
  _, commit, _ = block_sampler.sample(g, p, ctx, valid, fixed, jax.random.key(0),
                                      BlockSamplerConfig(block_size=8, steps=8,
                                                         temperature=0.0), **kw)
  assert sorted(np.asarray(commit)[0, 0]) == list(range(8))


def test_left_to_right_in_blocks_and_no_threshold_with_it(model):
  g, p = nnx.split(model)
  ctx, valid = context(5)
  fixed = -np.ones((2, 8), np.int32)
  cfg = BlockSamplerConfig(block_size=4, steps=4, temperature=1.0, confidence="left_to_right")
  _, commit, _ = block_sampler.sample(g, p, ctx, valid, fixed, jax.random.key(0), cfg,
                                      num_samples=1, mask_id=MASK, eot_id=EOT)
  commit = np.asarray(commit)[:, 0]
  # Block k's steps are numbered k * steps + s: position j commits at step j.
  decoded = commit >= 0  # blocks after the one holding <eot> are never decoded
  assert np.all(commit[decoded] == np.broadcast_to(np.arange(8), commit.shape)[decoded])
  with pytest.raises(ValueError, match="left_to_right"):
    dataclasses.replace(cfg, threshold=0.5).validate()


def test_max_commits_per_step_bounds_the_schedule():
  assert [block_sampler.max_commits_per_step(8, s, "loglinear") for s in (1, 2, 3, 8)] == [
      8, 4, 3, 1]
  assert block_sampler.max_commits_per_step(2, 2, "loglinear") == 1


@pytest.mark.parametrize("confidence", ["left_to_right", "random"])
@pytest.mark.parametrize("steps", [1, 3, 8])
def test_draw_free_confidences_commit_as_the_schedule_says(model, confidence, steps):
  """These draw only the labels they commit: each step must still commit the
  schedule's count, pins stay, and nothing is left masked."""
  g, p = nnx.split(model)
  ctx, valid = context(6)
  fixed = -np.ones((2, 16), np.int32)
  fixed[1, [1, 2, 9]] = [7, 8, 9]  # blocks of 8 with 6 and 7 free labels
  cfg = BlockSamplerConfig(block_size=8, steps=steps, temperature=1.0, confidence=confidence)
  tokens, commit, _ = block_sampler.sample(g, p, ctx, valid, fixed, jax.random.key(2), cfg,
                                           num_samples=2, mask_id=MASK, eot_id=EOT)
  tokens, commit = np.asarray(tokens), np.asarray(commit)
  assert not np.any(tokens == MASK)
  np.testing.assert_array_equal(tokens[1, :, [1, 2, 9]], np.broadcast_to([[7], [8], [9]], (3, 2)))
  frac = block_sampler.committed_fraction(steps, "loglinear")
  for b, gi, k in np.ndindex(2, 2, 2):
    free = fixed[b, 8 * k:8 * k + 8] < 0
    steps_taken = commit[b, gi, 8 * k:8 * k + 8][free]
    if np.all(steps_taken < 0):  # a block after the one holding <eot>
      continue
    n, done, expected = int(free.sum()), 0, []
    for s in range(steps):
      if done == n:
        break
      todo = n - done if s == steps - 1 else max(int(np.round(np.float32(n) * frac[s])) - done, 1)
      expected += [k * steps + s] * min(todo, n - done)
      done += min(todo, n - done)
    assert sorted(steps_taken) == expected
    if confidence == "left_to_right":
      assert list(steps_taken) == expected  # in position order


def test_clean_labels_need_the_shift():
  with pytest.raises(ValueError, match="clean_labels: needs shift"):
    block_rows.block_row([10, 11, 12], [20, 21, EOT], 2, shift=False, clean_labels=True)
