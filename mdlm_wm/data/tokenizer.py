"""SentencePiece tokenizer with the project's reserved special tokens.

Ids 0..N-1 are fixed (pad, unk, then the user-defined symbols in
`SPECIAL_TOKENS` order), so code can rely on `PAD_ID == 0` and look up the
others by name. Normalization is the identity and whitespace is kept as is,
so `decode(encode(text)) == text` for any UTF-8 text (byte fallback covers
characters outside the vocabulary): the serializer's round trip depends on it.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable, Sequence

import sentencepiece as spm

MASK, EOT = "<|mask|>", "<|eot|>"
# One marker opens each segment of the sequence layout (docs/design.md).
SEGMENTS = ("s0", "task", "tools", "rules", "steer", "history", "state", "action", "target")
MARKERS = {seg: f"<|{seg}|>" for seg in SEGMENTS}
SPECIAL_TOKENS = (MASK, EOT) + tuple(MARKERS.values())
PAD_ID = 0


class Tokenizer:
  """A loaded SentencePiece model plus the ids of the special tokens."""

  def __init__(self, model_proto: bytes):
    self._sp = spm.SentencePieceProcessor(model_proto=model_proto)
    self.model_proto = model_proto
    missing = [t for t in SPECIAL_TOKENS if self._sp.piece_to_id(t) == self._sp.unk_id()]
    if missing or self._sp.pad_id() != PAD_ID:
      raise ValueError(
          "tokenizer model lacks the reserved tokens of mdlm-wm "
          f"(pad id {self._sp.pad_id()}, missing {missing}); train it with "
          "mdlm_wm.data.tokenizer.train_tokenizer")
    self.pad_id = PAD_ID
    self.mask_id = self._sp.piece_to_id(MASK)
    self.eot_id = self._sp.piece_to_id(EOT)
    self.marker_ids = {seg: self._sp.piece_to_id(m) for seg, m in MARKERS.items()}
    self.special_ids = frozenset([self.pad_id, self._sp.unk_id(), self.mask_id, self.eot_id,
                                  *self.marker_ids.values()])

  @classmethod
  def load(cls, path: str | os.PathLike) -> Tokenizer:
    with open(path, "rb") as f:
      return cls(f.read())

  def save(self, path: str | os.PathLike) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
      f.write(self.model_proto)
    os.replace(tmp, path)

  @property
  def vocab_size(self) -> int:
    return self._sp.get_piece_size()

  def encode(self, text: str) -> list[int]:
    return self._sp.encode(text)

  def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
    return self._sp.encode(list(texts))

  def decode(self, ids: Iterable[int]) -> str:
    """Text of `ids`, skipping special tokens (pad, mask, eot, markers)."""
    return self._sp.decode([int(i) for i in ids if int(i) not in self.special_ids])

  def decode_target(self, ids: Iterable[int]) -> str:
    """Text of a generated target: everything before the first end-of-target."""
    out = []
    for i in ids:
      if int(i) == self.eot_id:
        break
      out.append(int(i))
    return self.decode(out)

  def id_to_piece(self, i: int) -> str:
    return self._sp.id_to_piece(int(i))


def train_tokenizer(texts: Iterable[str], vocab_size: int, *,
                    model_type: str = "bpe") -> Tokenizer:
  """Trains a tokenizer on `texts` in memory; deterministic for the same texts.

  `vocab_size` is an upper bound: a small corpus cannot support a large
  vocabulary, so SentencePiece is allowed to stop short (hard_vocab_limit off).
  BPE with pieces that may cross spaces is the default: on the built-in
  corpus it fills the vocabulary and needs ~28% fewer tokens than unigram
  pieces split at whitespace (measured on the quickstart corpus, 4096 pieces).
  """
  model = io.BytesIO()
  try:
    _train(texts, model, vocab_size, model_type)
  except RuntimeError as e:
    # SentencePiece reports a too-small vocabulary as an INTERNAL error.
    raise ValueError(f"cannot train a {vocab_size}-piece tokenizer: {e} (the 256 byte-fallback "
                     "pieces, the special tokens and every character of the corpus need room)"
                     ) from None
  return Tokenizer(model.getvalue())


def _train(texts: Iterable[str], model: io.BytesIO, vocab_size: int, model_type: str) -> None:
  spm.SentencePieceTrainer.train(
      sentence_iterator=iter(texts),
      model_writer=model,
      vocab_size=vocab_size,
      model_type=model_type,
      character_coverage=1.0,
      byte_fallback=True,
      split_digits=True,
      normalization_rule_name="identity",
      remove_extra_whitespaces=False,
      # No "▁" before every encoded segment: segments are concatenated as is.
      add_dummy_prefix=False,
      allow_whitespace_only_pieces=True,
      split_by_whitespace=False,
      max_sentence_length=1 << 16,
      user_defined_symbols=list(SPECIAL_TOKENS),
      pad_id=PAD_ID, unk_id=1, bos_id=-1, eos_id=-1,
      hard_vocab_limit=False,
      # One thread: multi-threaded EM is not bit-reproducible across runs.
      num_threads=1,
      minloglevel=2,
  )
