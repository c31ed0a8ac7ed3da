import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from mdlm_wm.diffusion import loss, schedule
from mdlm_wm.model import sharding
from mdlm_wm.model.transformer import ModelConfig, Transformer
from mdlm_wm.rl import logprob

V, MASK = 12, 11
# Two left-padded contexts (row 0 has two pad columns) and their completions.
CONTEXT = np.array([[0, 0, 5, 7], [3, 9, 4, 6]], np.int32)
VALID = CONTEXT > 0
COMPLETION = np.array([[2, 8, 1, 4], [10, 3, 3, 5]], np.int32)
COUNTED = np.array([[1, 1, 1, 0], [1, 1, 1, 1]], bool)  # row 0: last token after <eot>


def tiny_model(attention: str, seed: int = 0, n_layers: int = 1):
  cfg = ModelConfig(vocab_size=V, d_model=32, n_layers=n_layers, n_heads=4, n_kv_heads=2, d_ff=64,
                    attention=attention)
  with jax.set_mesh(sharding.make_mesh((1, 1, 1))):
    model = Transformer(cfg, rngs=nnx.Rngs(seed))
    # Larger embeddings than the init: sharp predictions that depend on what is visible.
    emb = model.embed.embedding
    emb[...] = 0.5 * jax.random.normal(jax.random.key(seed + 1), emb.shape)
  return model


@pytest.fixture(scope="module")
def bidir():
  return tiny_model("bidirectional")


def jitted(fn, model, **kwargs):
  """fn(model, *args) under jit with the model passed as split params, as callers do."""
  graphdef, params = nnx.split(model)
  f = jax.jit(lambda params, *args: fn(nnx.merge(graphdef, params), *args, **kwargs))
  return lambda *args: f(params, *args)


model_call = nnx.jit(lambda model, *args: model(*args))  # compiled once per shape


def manual_subs_logp(model, context, valid, canvas, completion):
  """SUBS log p of `completion` given [context | canvas], with training-style positions.

  Real context tokens sit at 0..len-1 and the canvas after them (not at the
  column index as in the module): RoPE makes the two layouts agree.
  """
  B, C = context.shape
  T = canvas.shape[1]
  pad = C - valid.sum(1)
  tokens = jnp.concatenate([context, canvas], axis=1)
  positions = jnp.arange(C + T)[None, :] - pad[:, None]
  ones = np.ones((B, T), np.int32)
  segments = jnp.concatenate([valid.astype(np.int32), ones], axis=1)
  target = jnp.concatenate([np.zeros((B, C), np.int32), ones], axis=1)
  logits = model_call(model, tokens, positions, segments, target)[:, C:]
  logp = loss.subs_log_probs(logits, MASK)
  return np.asarray(jnp.take_along_axis(logp, completion[..., None], axis=-1)[..., 0])


def test_ar_logprob_is_the_chain_rule_over_prefixes():
  model = tiny_model("causal")
  logp = np.asarray(jitted(logprob.ar_logprob, model)(CONTEXT, VALID, COMPLETION))
  for b in range(len(CONTEXT)):
    real = CONTEXT[b][VALID[b]]
    for j in range(COMPLETION.shape[1]):
      seq = np.concatenate([real, COMPLETION[b, :j]])[None]
      expected = jax.nn.log_softmax(model_call(model, seq)[0, -1])[COMPLETION[b, j]]
      assert logp[b, j] == pytest.approx(float(expected), abs=1e-5)
  with pytest.raises(ValueError, match="causal"):
    logprob.ar_logprob(tiny_model("bidirectional"), CONTEXT, VALID, COMPLETION)


def test_one_step_masks_the_whole_completion_and_context_at_the_given_rate(bidir):
  all_masked = np.full_like(COMPLETION, MASK)
  for rate, context in [(0.0, CONTEXT), (1.0, np.where(VALID, MASK, CONTEXT))]:
    got = jitted(logprob.mdlm_one_step_logprob, bidir, mask_id=MASK, prompt_mask_rate=rate)(
        CONTEXT, VALID, COMPLETION, jax.random.key(0))
    expected = manual_subs_logp(bidir, context, VALID, all_masked, COMPLETION)
    np.testing.assert_allclose(got, expected, atol=1e-5)


@pytest.mark.parametrize("kind", ["linear", "loglinear"])
def test_coupled_scores_each_counted_token_once_in_the_pass_that_masks_it(bidir, kind):
  context, valid, completion, counted = (np.tile(x, (3, 1)) for x in
                                         (CONTEXT, VALID, COMPLETION, COUNTED))
  rng = jax.random.key(3)
  logp, weight = jitted(logprob.mdlm_coupled_logprob, bidir, mask_id=MASK, schedule=kind)(
      context, valid, completion, counted, rng)
  t, in1 = (np.asarray(x) for x in logprob._coupled_pass1(rng, counted, kind))
  in2 = (np.asarray(weight) > 0) & ~in1
  assert in1.any() and in2.any()
  np.testing.assert_array_equal(in1 | in2, counted)  # all counted tokens scored ...
  assert not (in1 & in2).any() and not (in1 & ~counted).any()  # ... once, no others

  pass1 = manual_subs_logp(bidir, context, valid, np.where(in1, MASK, completion), completion)
  pass2 = manual_subs_logp(bidir, context, valid, np.where(in2, MASK, completion), completion)
  np.testing.assert_allclose(logp, np.where(in1, pass1, np.where(in2, pass2, 0.0)), atol=1e-5)
  # Pass 2 is a mask at rate alpha(t): the time t' with 1 - alpha(t') = alpha(t).
  eps = schedule.LOGLINEAR_EPS if kind == "loglinear" else 0.0
  t_prime = np.asarray(schedule.alpha(t, kind)) / (1 - eps)
  w1 = 0.5 * np.asarray(schedule.elbo_weight(t, kind))[:, None]
  w2 = 0.5 * np.asarray(schedule.elbo_weight(t_prime, kind))[:, None]
  np.testing.assert_allclose(weight, np.where(in1, w1, np.where(in2, w2, 0.0)), rtol=1e-4)


def enumerated_elbo(model, context, valid, completion, counted, lo, hi):
  """Exact expectation of the linear-schedule ELBO estimator with t ~ U(lo, hi), one row.

  With masking rate t per token and weight 1/t, a set S of k of the n counted
  tokens is masked with probability t^k (1 - t)^(n-k), so its log-prob sum
  enters with coefficient mean_t t^(k-1) (1 - t)^(n-k); over [0, 1] this is
  Beta(k, n - k + 1) = (k-1)! (n-k)! / n!, the exact ELBO.
  """
  idx = np.flatnonzero(counted[0])
  n = len(idx)
  subsets = [s for k in range(1, n + 1) for s in itertools.combinations(idx, k)]
  masks = np.zeros((len(subsets), completion.shape[1]), bool)
  for r, s in enumerate(subsets):
    masks[r, list(s)] = True
  rows = lambda x: np.repeat(x, len(subsets), axis=0)
  canvas = np.where(masks, MASK, rows(completion))
  logp = manual_subs_logp(model, rows(context), rows(valid), canvas, rows(completion))
  return sum(coefficient(mask.sum(), n, lo, hi) * lp[mask].sum() for mask, lp in zip(masks, logp))


def coefficient(k, n, lo, hi):
  """mean over t ~ U(lo, hi) of t^(k-1) (1 - t)^(n-k), integrated exactly."""
  P = np.polynomial.Polynomial
  integral = (P([0, 1]) ** (k - 1) * P([1, -1]) ** (n - k)).integ()
  return (integral(hi) - integral(lo)) / (hi - lo)


def test_coefficients_over_the_unit_interval_are_beta_functions():
  for n in range(1, 5):
    for k in range(1, n + 1):
      beta = math.factorial(k - 1) * math.factorial(n - k) / math.factorial(n)
      assert coefficient(k, n, 0.0, 1.0) == pytest.approx(beta, rel=1e-12)


@pytest.fixture(scope="module")
def one_example(bidir):
  """Row 0 (padded context, one uncounted token) and its exact ELBO."""
  example = tuple(x[:1] for x in (CONTEXT, VALID, COMPLETION, COUNTED))
  return example, enumerated_elbo(bidir, *example, 0.0, 1.0)


def assert_matches(samples, target, exact):
  """Mean within 4 standard errors of its exact expectation, which is near the exact ELBO."""
  mean = samples.mean()
  se = samples.std(ddof=1) / np.sqrt(len(samples))
  assert abs(mean - target) < 4 * se, (mean, target, se)
  assert abs(target - exact) < 5e-3 * abs(exact), (target, exact)  # the t_min truncation
  assert se < 0.02 * abs(exact)  # tight enough that a wrong weight would show


def test_mdlm_elbo_matches_the_enumerated_elbo(bidir, one_example):
  example, exact = one_example
  R = 512  # independent rows of the same example, 64 stratified samples each
  elbo = jitted(logprob.mdlm_elbo, bidir, mask_id=MASK, num_samples=64, schedule="linear")(
      *(np.repeat(x, R, axis=0) for x in example), jax.random.key(1))
  target = enumerated_elbo(bidir, *example, logprob.T_MIN, 1.0)
  assert_matches(np.asarray(elbo), target, exact)


def test_coupled_estimate_matches_the_enumerated_elbo(bidir, one_example):
  example, exact = one_example
  R = 8192
  logp, weight = jitted(logprob.mdlm_coupled_logprob, bidir, mask_id=MASK, schedule="linear")(
      *(np.repeat(x, R, axis=0) for x in example), jax.random.key(2))
  target = enumerated_elbo(bidir, *example, logprob.T_MIN, 1.0 - logprob.T_MIN)
  assert_matches(np.asarray((weight * logp).sum(-1)), target, exact)


_ARGS = (CONTEXT, VALID, COMPLETION)
ESTIMATORS = {  # name -> fn(model, rng), the arrays each MDLM estimator returns
    "one_step": lambda m, rng: logprob.mdlm_one_step_logprob(
        m, *_ARGS, rng, mask_id=MASK, prompt_mask_rate=0.5),
    "coupled": lambda m, rng: logprob.mdlm_coupled_logprob(m, *_ARGS, COUNTED, rng,
                                                           mask_id=MASK),
    "elbo": lambda m, rng: logprob.mdlm_elbo(m, *_ARGS, COUNTED, rng, mask_id=MASK,
                                             num_samples=2),
}


def test_same_rng_gives_same_masks_for_old_new_and_reference(bidir):
  graphdef, params = nnx.split(bidir)
  copy = jax.tree.map(jnp.copy, params)  # e.g. old and new policy before the first update
  f = jax.jit(lambda params, rng: {name: fn(nnx.merge(graphdef, params), rng)
                                   for name, fn in ESTIMATORS.items()})
  key = jax.random.fold_in(jax.random.key(7), 3)
  a, b, c = f(params, key), f(copy, key), f(params, jax.random.fold_in(jax.random.key(7), 4))
  for name in a:
    for x, y, z in zip(*(jax.tree.leaves(v[name]) for v in (a, b, c))):
      np.testing.assert_array_equal(x, y)
      assert not np.array_equal(x, z), name


def test_gradients_are_finite_and_nonzero(bidir):
  def scalar(out):
    if isinstance(out, tuple):
      logp, weight = out
      return (weight * logp).sum()
    return out.sum()

  graphdef, params = nnx.split(bidir)
  causal_graphdef, causal_params = nnx.split(tiny_model("causal"))
  ar = lambda p: logprob.ar_logprob(nnx.merge(causal_graphdef, p), CONTEXT, VALID,
                                    COMPLETION).sum()

  @jax.jit
  def all_grads(params, causal_params):
    grads = {name: jax.grad(lambda p, fn=fn: scalar(fn(nnx.merge(graphdef, p),
                                                       jax.random.key(0))))(params)
             for name, fn in ESTIMATORS.items()}
    return {**grads, "ar": jax.grad(ar)(causal_params)}

  for name, g in all_grads(params, causal_params).items():
    leaves = [np.asarray(x) for x in jax.tree.leaves(g)]
    assert all(np.isfinite(x).all() for x in leaves), name
    assert sum(np.abs(x).sum() for x in leaves) > 0, name


def test_block_coupled_at_b1_with_shift_is_the_exact_ar_logprob(bidir):
  # At b = 1 with the shift every token is its block's last: scored with the
  # AR's attention (causal context, clean tokens before it), whatever the masks.
  del bidir
  causal = tiny_model("causal")
  exact = jitted(lambda m, *a: logprob._forward(m, *a, shift=1), causal)(
      CONTEXT, VALID, COMPLETION)
  want = jnp.take_along_axis(loss.subs_log_probs(exact, MASK), COMPLETION[..., None], -1)[..., 0]
  est = jitted(logprob.block_coupled_logprob, causal, mask_id=MASK, block_size=1, shift=True)
  for seed in range(2):
    logp, weight = est(CONTEXT, VALID, COMPLETION, COUNTED, jax.random.key(seed))
    np.testing.assert_allclose(np.asarray(logp)[COUNTED], np.asarray(want)[COUNTED], atol=1e-5)
    np.testing.assert_array_equal(np.asarray(weight), COUNTED.astype(np.float32))


def test_block_coupled_scores_each_counted_token_once(bidir):
  est = jitted(logprob.block_coupled_logprob, bidir, mask_id=MASK, block_size=2, shift=True)
  logp, weight = est(CONTEXT, VALID, COMPLETION, COUNTED, jax.random.key(0))
  logp, weight = np.asarray(logp), np.asarray(weight)
  assert np.all(weight[COUNTED] > 0) and np.all(weight[~COUNTED] == 0)
  assert np.all(logp[COUNTED] < 0) and np.all(logp[~COUNTED] == 0)


def test_block_coupled_reads_the_clean_copy_as_trained():
  # Block 0 sees no clean block, so the causal clean copy changes only the
  # scores of later blocks (their left context is written causally; from the
  # second layer on, since first-layer keys and values are the embeddings).
  model = tiny_model("bidirectional", n_layers=2)
  est = lambda causal_clean: jitted(logprob.block_coupled_logprob, model, mask_id=MASK,
                                    block_size=2, shift=True, causal_clean=causal_clean)(
      CONTEXT, VALID, COMPLETION, COUNTED, jax.random.key(0))[0]
  plain, causal = np.asarray(est(False)), np.asarray(est(True))
  np.testing.assert_allclose(causal[:, :2], plain[:, :2], atol=1e-6)
  later = COUNTED[:, 2:]
  assert np.abs(causal[:, 2:] - plain[:, 2:])[later].max() > 1e-4
