"""Text metrics on hand-made cases with known values, and MAUVE on real states."""

import math

import numpy as np
import pytest

from mdlm_wm.envs import base, registry
from mdlm_wm.eval import metrics


def test_tokenize_keeps_words_and_numbers_drops_punctuation():
  text = '{"refund": 22.98, "to": "milo.costa@acme.io"} [cwd: /home/user | goal: 1/2] -20C, 12:00.'
  assert metrics.tokenize(text) == ["refund", "22.98", "to", "milo.costa@acme.io", "cwd",
                                    "/home/user", "goal", "1/2", "-20C", "12:00"]


def test_bleu1_identical_disjoint_and_known_values():
  assert metrics.bleu1("You are in the kitchen.", "You are in the kitchen.") == 1.0
  assert metrics.bleu1("a b c", "d e f") == 0.0
  # Precision 1, brevity penalty exp(1 - 4/2).
  assert metrics.bleu1("a b", "a b c d") == pytest.approx(math.exp(-1))
  # Clipped counts: "a" matches once only.
  assert metrics.bleu1("a a a a", "a b c d") == pytest.approx(0.25)
  # JSON punctuation is not counted as matching unigrams.
  assert metrics.bleu1('{"status": 200}', "status 200") == 1.0
  assert metrics.bleu1("", "") == 1.0
  assert metrics.bleu1("", "a") == 0.0
  assert metrics.bleu1("a", "") == 0.0


def test_corpus_bleu1_pools_counts():
  # 2 of 3 unigrams match; lengths 3 and 3.
  assert metrics.corpus_bleu1(["a b", "c"], ["a b", "d"]) == pytest.approx(2 / 3)
  with pytest.raises(ValueError):
    metrics.corpus_bleu1(["a"], ["a", "b"])


def test_rouge_l_known_values():
  # LCS "the cat on mat" = 4 of 6 tokens each way.
  assert metrics.rouge_l("the cat sat on the mat", "the cat lay on a mat") == pytest.approx(2 / 3)
  assert metrics.rouge_l("x y", "x y") == 1.0
  assert metrics.rouge_l("x y", "z w") == 0.0
  # Numbers stay whole: 22.98 vs 22.97 is one wrong token of two.
  assert metrics.rouge_l("total 22.98", "total 22.97") == pytest.approx(0.5)
  # Case is kept.
  assert metrics.rouge_l("Kitchen", "kitchen") == 0.0


def test_exact_match_strips_trailing_whitespace_only():
  assert metrics.exact_match("a b\n", "a b") == 1.0
  assert metrics.exact_match(" a b", "a b") == 0.0
  assert metrics.exact_match("a  b", "a b") == 0.0


def test_self_bleu():
  assert metrics.self_bleu(["a b c", "a b c", "a b c"]) == 1.0
  assert metrics.self_bleu(["a b", "c d", "e f"]) == 0.0
  # Each sample matches one of its two unigrams in the other.
  assert metrics.self_bleu(["a b", "a c"]) == pytest.approx(0.5)
  with pytest.raises(ValueError):
    metrics.self_bleu(["a b"])


def test_distinct_n_known_values():
  samples = ["a b a b", "a c"]
  assert metrics.distinct_n(samples, 1) == pytest.approx(3 / 6)
  # a b, b a, a b, a c: n-grams never span two samples.
  assert metrics.distinct_n(samples, 2) == pytest.approx(3 / 4)
  assert metrics.distinct_n(["x y z"], 3) == 1.0
  assert math.isnan(metrics.distinct_n(["a b"], 3))
  with pytest.raises(ValueError):
    metrics.distinct_n(samples, 0)


def _reference_states(n: int) -> list[str]:
  """Real next states from the built-in environments, round robin."""
  states = []
  for seed in range(n):
    name = registry.env_names()[seed % len(registry.env_names())]
    ep, _ = base.run_episode(registry.make(name), seed, "noisy")
    states.append(ep.steps[len(ep.steps) // 2].next_state)
  return states


def _prose(n: int) -> list[str]:
  words = ["river", "mountain", "quiet", "morning", "letter", "garden", "story", "winter"]
  return [f"The {words[i % 8]} and the {words[(3 * i) % 8]} met on a {words[(5 * i + 1) % 8]} "
          f"day, and nobody {i} remembered why." for i in range(n)]


def test_tfidf_svd_encoder_is_fitted_on_references_only():
  enc = metrics.TfidfSvdEncoder(dim=64).fit(["alpha beta", "beta gamma", "gamma delta"])
  feats = enc.transform(["alpha beta", "unseen words only"])
  # Capped at the number of references (3) and the vocabulary size minus one.
  assert feats.shape == (2, 3)
  assert np.linalg.norm(feats[0]) == pytest.approx(1.0)
  assert np.all(feats[1] == 0.0)


def test_mauve_identical_high_different_low_and_deterministic():
  refs = _reference_states(40)
  same = metrics.mauve_score(refs, refs)
  assert same > 0.99
  prose = _prose(40)
  different = metrics.mauve_score(prose, refs)
  assert different < 0.3
  assert metrics.mauve_score(prose, refs) == different


def test_mauve_from_features_accepts_precomputed_arrays():
  rng = np.random.default_rng(0)
  p = rng.normal(size=(30, 8))
  assert metrics.mauve_from_features(p, p, num_buckets=1000) > 0.99
  assert metrics.mauve_from_features(p, p + 10.0) < 0.3
  with pytest.raises(ValueError):
    metrics.mauve_from_features(p, p[:0])
