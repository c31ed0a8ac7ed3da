"""Text metrics of predicted next states: overlap, diversity and MAUVE.

Tokenization. BLEU-1, Self-BLEU, ROUGE-L and the TF-IDF encoder share one
tokenizer, `tokenize`: maximal runs of word characters, joined across a single
inner `.`, `:`, `/`, `@`, `'` or `-` (so `22.98`, `12:00`, `1/2`,
`milo.costa@acme.io` and `ev104` stay one token), keeping a leading `/`
(paths) or a minus before a digit (`-20C`); case kept. Punctuation alone is
dropped: next states are often JSON, and counting every quote, brace and
colon as a matched unigram would let any JSON-shaped output score high.
Distinct-n alone uses whitespace tokens (`str.split`), the usual definition.

Degenerate texts: two texts with no tokens at all are identical and score
1.0; a prediction or reference with no tokens against one with tokens scores
0.0.

The metric libraries (sacrebleu, rouge-score, scikit-learn, mauve-text: the
`eval` extra) are imported on first use, so the tokenizer and Distinct-n work
without them and importing this module stays fast.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Protocol

import numpy as np

_TOKEN = re.compile(r"(?:/|-(?=\d))?\w+(?:[.:/@'-]\w+)*")


def tokenize(text: str) -> list[str]:
  """Words and numbers of `text` (see module docstring)."""
  return _TOKEN.findall(text)


def _joined(text: str) -> str:
  return " ".join(tokenize(text))


# --------------------------------------------------------------------------
# Overlap with the reference.


@functools.cache
def _bleu1_scorer():
  """sacrebleu BLEU restricted to unigrams, on `tokenize`d text (tok:none).

  No smoothing: with one n-gram order, smoothing only matters when no unigram
  matches, and sacrebleu's default ('exp') would then give disjoint texts a
  positive score. effective_order is irrelevant for order 1 (set to silence
  sacrebleu's sentence-level warning).
  """
  from sacrebleu.metrics import BLEU
  return BLEU(max_ngram_order=1, smooth_method="none", tokenize="none", effective_order=True)


def _unit(score: float) -> float:
  """sacrebleu's 0-100 score as [0, 1] (clipped: 100 can come out as 100.00000000000004)."""
  return min(1.0, max(0.0, score / 100.0))


def bleu1(prediction: str, reference: str) -> float:
  """Sentence BLEU-1 in [0, 1]: clipped unigram precision times sacrebleu's
  brevity penalty exp(1 - r/c), applied when the prediction has fewer
  tokens (c) than the reference (r)."""
  return _multi_ref_bleu1(prediction, [reference])


def _multi_ref_bleu1(prediction: str, references: Sequence[str]) -> float:
  hyp, refs = _joined(prediction), [_joined(r) for r in references]
  if not hyp or not any(refs):
    return float(not hyp and not any(refs))
  return _unit(_bleu1_scorer().sentence_score(hyp, refs).score)


def corpus_bleu1(predictions: Sequence[str], references: Sequence[str]) -> float:
  """Corpus BLEU-1 in [0, 1]: unigram matches and lengths summed over all
  pairs before dividing (not the mean of sentence scores)."""
  if len(predictions) != len(references):
    raise ValueError(f"{len(predictions)} predictions for {len(references)} references")
  hyps, refs = [_joined(p) for p in predictions], [_joined(r) for r in references]
  if not any(hyps) or not any(refs):
    return float(not any(hyps) and not any(refs))
  return _unit(_bleu1_scorer().corpus_score(hyps, [refs]).score)


class _RegexTokenizer:
  """rouge-score's tokenizer interface over `tokenize` (its default one drops
  everything but [a-z0-9] and so splits `22.98` into two tokens)."""

  def tokenize(self, text: str) -> list[str]:
    return tokenize(text)


@functools.cache
def _rouge_l_scorer():
  from rouge_score import rouge_scorer
  return rouge_scorer.RougeScorer(["rougeL"], tokenizer=_RegexTokenizer())


def rouge_l(prediction: str, reference: str) -> float:
  """ROUGE-L F-measure (rouge-score, longest common subsequence of `tokenize`
  tokens; case kept, no stemming)."""
  if not tokenize(prediction) or not tokenize(reference):
    return float(not tokenize(prediction) and not tokenize(reference))
  return float(_rouge_l_scorer().score(reference, prediction)["rougeL"].fmeasure)


def exact_match(prediction: str, reference: str) -> float:
  """1.0 when the texts are equal after stripping trailing whitespace (a
  sampler may or may not emit a final newline), else 0.0. Case and inner
  whitespace count."""
  return float(prediction.rstrip() == reference.rstrip())


# --------------------------------------------------------------------------
# Diversity over G samples of one prompt.


def self_bleu(samples: Sequence[str]) -> float:
  """Mean over samples of BLEU-1 of each sample against all the others as
  references (multi-reference sacrebleu). Lower is more diverse: identical
  samples give 1.0, pairwise disjoint ones 0.0. Raises ValueError for fewer
  than two samples, where diversity is undefined."""
  if len(samples) < 2:
    raise ValueError(f"self_bleu needs at least 2 samples, got {len(samples)}")
  samples = list(samples)
  return float(np.mean([_multi_ref_bleu1(s, samples[:i] + samples[i + 1:])
                        for i, s in enumerate(samples)]))


def distinct_n(samples: Sequence[str], n: int) -> float:
  """Unique n-grams / total n-grams over all samples, n-grams taken within
  each sample over whitespace tokens (never across samples). nan when the
  samples hold no n-gram at all."""
  if n < 1:
    raise ValueError(f"n must be >= 1, got {n}")
  grams = [tuple(toks[i:i + n]) for s in samples for toks in [s.split()]
           for i in range(len(toks) - n + 1)]
  return len(set(grams)) / len(grams) if grams else float("nan")


# --------------------------------------------------------------------------
# MAUVE between generated and reference sets.


class Encoder(Protocol):
  """What `mauve_score` needs of a text encoder: fitted on the references,
  then mapping any texts to a [len(texts), d] feature array."""

  def fit(self, references: Sequence[str]) -> "Encoder":
    ...

  def transform(self, texts: Sequence[str]) -> np.ndarray:
    ...


class TfidfSvdEncoder:
  """A fixed text encoder for MAUVE, independent of the models under test.

  TF-IDF over `tokenize` tokens (scikit-learn, sublinear tf, fitted on the
  references only, so a prediction's words the references never use add
  nothing), projected by TruncatedSVD to `dim` dimensions (capped at one less
  than the vocabulary and at the number of references) with a fixed
  random_state, then L2-normalised. Deterministic given the references.
  """

  def __init__(self, dim: int = 64, seed: int = 0):
    self.dim = dim
    self.seed = seed

  def fit(self, references: Sequence[str]) -> "TfidfSvdEncoder":
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer
    self._tfidf = TfidfVectorizer(analyzer=tokenize, sublinear_tf=True)
    x = self._tfidf.fit_transform(list(references))
    dim = max(1, min(self.dim, x.shape[1] - 1, x.shape[0]))
    self._svd = TruncatedSVD(n_components=dim, random_state=self.seed).fit(x)
    return self

  def transform(self, texts: Sequence[str]) -> np.ndarray:
    from sklearn.preprocessing import normalize
    return normalize(self._svd.transform(self._tfidf.transform(list(texts))))


def mauve_from_features(p_features: np.ndarray, q_features: np.ndarray, *,
                        num_buckets: int | str = "auto", seed: int = 25) -> float:
  """MAUVE (mauve-text `compute_mauve`, no smoothing) between reference
  features `p_features` [n, d] and generated features `q_features` [m, d].

  num_buckets 'auto' is mauve-text's rule max(2, round(min(n, m) / 10)), so
  small sets work; an integer is capped at n + m (k-means cannot make more
  clusters than points). Other settings are mauve-text's defaults: rows
  L2-normalised, PCA to 90% explained variance, k-means (faiss) with 5
  restarts and 500 iterations, scaling factor c = 5; `seed` (mauve-text's
  default 25) fixes PCA and k-means, so the score is deterministic.
  """
  import mauve
  p, q = np.asarray(p_features, np.float32), np.asarray(q_features, np.float32)
  if len(p) == 0 or len(q) == 0:
    raise ValueError(f"MAUVE needs non-empty sets, got {len(p)} and {len(q)} samples")
  if num_buckets != "auto":
    num_buckets = min(int(num_buckets), len(p) + len(q))
  out = mauve.compute_mauve(p_features=p, q_features=q, num_buckets=num_buckets, seed=seed)
  return min(1.0, float(out.mauve))  # the area can exceed 1 by rounding


def mauve_score(predictions: Sequence[str], references: Sequence[str], *,
                features: str | Encoder = "tfidf-svd", dim: int = 64,
                num_buckets: int | str = "auto", seed: int = 25) -> float:
  """MAUVE in [0, 1] between the generated and the reference texts (higher:
  closer). `features` is "tfidf-svd" (a `TfidfSvdEncoder(dim)`) or any encoder
  with `fit(references)` and `transform(texts)`; the encoder is fitted on the
  references only. For features computed elsewhere, call
  `mauve_from_features`."""
  if isinstance(features, str):
    if features != "tfidf-svd":
      raise ValueError(f"unknown features {features!r}; expected 'tfidf-svd' or an encoder")
    features = TfidfSvdEncoder(dim=dim)
  encoder = features.fit(references)
  return mauve_from_features(encoder.transform(references), encoder.transform(predictions),
                             num_buckets=num_buckets, seed=seed)
