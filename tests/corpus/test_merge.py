"""Merging corpus directories: concatenated splits, one tokenizer, unique ids."""

import json

import pytest

from mdlm_wm import corpus
from mdlm_wm.corpus import merge
from mdlm_wm.data import schema
from mdlm_wm.data.schema import SchemaError
from mdlm_wm.data.tokenizer import Tokenizer


def _part(path, envs, holdout=()):
  cfg = corpus.CorpusConfig(envs=list(envs) + list(holdout), episodes_per_env=10,
                            holdout_envs=list(holdout), tokenizer_vocab=0)
  corpus.build_corpus(cfg, str(path), verbose=False)
  return str(path)


def test_merged_splits_are_the_parts_in_order_with_one_tokenizer(tmp_path):
  a = _part(tmp_path / "a", ["household"], holdout=["lab"])
  b = _part(tmp_path / "b", ["files"])
  out = tmp_path / "merged"
  result = merge.merge_corpora({"a": a, "b": b}, str(out), tokenizer_vocab=512)
  for split in ("train", "valid", "test"):
    ids = [ep.id for ep in schema.load_episodes(str(out / f"{split}.jsonl"))]
    expected = [ep.id for part in (a, b)
                for ep in schema.load_episodes(f"{part}/{split}.jsonl")]
    assert ids == expected and len(ids) > 0
  # Only part a has a held-out file; it is carried over alone.
  assert {ep.env for ep in schema.load_episodes(str(out / "heldout_env.jsonl"))} == {"lab"}
  stats = json.loads((out / "stats.json").read_text())
  assert stats["parts"] == {"a": "../a", "b": "../b"}
  assert set(stats["stats"]["train"]) == {"household", "files"}
  assert result["tokenizer"]["vocab_size"] == 512
  tok = Tokenizer.load(str(out / "tokenizer.model"))
  # Text of both parts tokenizes without falling back to single characters.
  for env in ("household", "files"):
    ep = next(e for e in schema.load_episodes(str(out / "train.jsonl")) if e.env == env)
    text = ep.steps[0].next_state
    assert len(tok.encode(text)) < 0.6 * len(text), env


def test_a_rebuild_removes_a_split_no_part_has_any_more(tmp_path):
  a = _part(tmp_path / "a", ["household"], holdout=["lab"])
  out = tmp_path / "merged"
  merge.merge_corpora({"a": a}, str(out), tokenizer_vocab=0)
  assert (out / "heldout_env.jsonl").exists()
  b = _part(tmp_path / "b", ["files"])
  merge.merge_corpora({"b": b}, str(out), tokenizer_vocab=0)
  assert not (out / "heldout_env.jsonl").exists()
  assert not (out / "tokenizer.model").exists()


def test_an_episode_id_in_two_parts_is_an_error_naming_both_places(tmp_path):
  a = _part(tmp_path / "a", ["household"])
  with pytest.raises(SchemaError, match=r"a/train\.jsonl:1: episode id .* is also at .*"
                                        r"a/train\.jsonl:1"):
    merge.merge_corpora({"a": a, "again": a}, str(tmp_path / "merged"), tokenizer_vocab=0)


def test_a_line_without_an_id_names_its_file_and_line(tmp_path):
  a = _part(tmp_path / "a", ["household"])
  with open(f"{a}/valid.jsonl", "a", encoding="utf-8") as f:
    f.write('{"env": "household"}\n')
  with pytest.raises(SchemaError, match=r"valid\.jsonl:\d+: not an episode with an 'id'"):
    merge.merge_corpora({"a": a}, str(tmp_path / "merged"), tokenizer_vocab=0)
