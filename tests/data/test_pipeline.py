import gzip
import shutil

import numpy as np
import pytest

from mdlm_wm.data import pipeline
from mdlm_wm.data.tokenizer import train_tokenizer
from tests.conftest import episode_dict

CFG = pipeline.PipelineConfig(batch_size=4, seq_len=512, max_context_len=160,
                              max_target_len=64, history_len=1, seed=3, read_threads=2)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  import json
  path = tmp_path_factory.mktemp("pipe") / "train.jsonl"
  with open(path, "w") as f:
    for i in range(40):
      f.write(json.dumps(episode_dict(i, n_steps=1 + i % 4, env=f"env{i % 3}")) + "\n")
  return str(path)


@pytest.fixture(scope="module")
def tok(corpus):
  from mdlm_wm.data import schema
  texts = [t for ep in schema.iter_episodes(corpus) for s in ep.steps
           for t in (s.state, s.action, s.next_state)] + ["Find the key.", "Rooms connect north."]
  return train_tokenizer(texts, 400)


def batches(corpus, tok, n, cfg=CFG, **kw):
  ds, _ = pipeline.make_dataset(corpus, tok, cfg, **kw)
  it = iter(ds)
  return [next(it) for _ in range(n)]


def test_batch_layout(corpus, tok):
  (b,) = batches(corpus, tok, 1)
  assert set(b) == {"tokens", "target_mask", "steer_mask", "segment_ids", "positions"}
  for v in b.values():
    assert v.shape == (4, 512) and v.dtype == np.int32
  seg = b["segment_ids"]
  # Padding carries no target and pad tokens only.
  assert np.all(b["target_mask"][seg == 0] == 0) and np.all(b["tokens"][seg == 0] == 0)
  # Each packed example starts at position 0 with the <s0> marker and ends its
  # target region with <eot>.
  starts = (b["positions"] == 0) & (seg > 0)
  assert np.all(b["tokens"][starts] == tok.marker_ids["s0"])
  assert starts.sum() > 4, "rows should hold several packed examples"
  target = b["target_mask"] == 1
  assert np.any(b["tokens"][target] == tok.eot_id)
  assert not np.any(np.isin(b["tokens"][target], list(tok.marker_ids.values())))
  # The steer span sits right after its marker, inside the context.
  steer = b["steer_mask"] == 1
  assert steer.any() and not (steer & target).any()
  after_marker = np.roll(b["tokens"] == tok.marker_ids["steer"], 1, axis=1)
  nonempty = after_marker & (b["tokens"] != tok.marker_ids["history"])
  assert nonempty.any() and np.all(steer[nonempty])
  assert np.all(b["tokens"][steer] != tok.marker_ids["history"])


def test_packing_keeps_padding_low(corpus, tok):
  packed = np.mean([pipeline.padding_fraction(b) for b in batches(corpus, tok, 5)])
  one_per_row = pipeline.PipelineConfig(**{**CFG.__dict__, "packing_bins": 4})
  _, rows = pipeline.make_dataset(corpus, tok, one_per_row)
  src = pipeline.TransitionSource(corpus, history_len=1)
  lengths = [len(rows.map(src[i])["tokens"]) for i in range(len(src))]
  unpacked = 1 - np.mean(lengths) / CFG.seq_len
  assert packed < unpacked / 2, (packed, unpacked)


def test_same_seed_same_batches_and_other_seed_differs(corpus, tok):
  a, b = batches(corpus, tok, 3), batches(corpus, tok, 3)
  for x, y in zip(a, b):
    np.testing.assert_array_equal(x["tokens"], y["tokens"])
  other = batches(corpus, tok, 1, cfg=pipeline.PipelineConfig(**{**CFG.__dict__, "seed": 4}))
  assert not np.array_equal(a[0]["tokens"], other[0]["tokens"])


def test_iterator_resumes_to_the_same_next_batch(corpus, tok):
  ds, _ = pipeline.make_dataset(corpus, tok, CFG)
  it = iter(ds)
  for _ in range(3):  # into the second epoch of 100 transitions
    next(it)
  state = it.get_state()
  expected = [next(it) for _ in range(2)]
  fresh = iter(pipeline.make_dataset(corpus, tok, CFG)[0])
  fresh.set_state(state)
  for want in expected:
    got = next(fresh)
    for k in want:
      np.testing.assert_array_equal(got[k], want[k])


def test_processes_read_disjoint_shards(corpus, tok):
  src = pipeline.TransitionSource(corpus, history_len=1)
  assert len(src) == sum(1 + i % 4 for i in range(40))
  cfg = pipeline.PipelineConfig(**{**CFG.__dict__, "num_epochs": 1, "batch_size": 1})
  seen = []
  for p in range(2):
    ds, rows = pipeline.make_dataset(corpus, tok, cfg, process_index=p, process_count=2,
                                     source=src)
    keys = set()
    for b in ds:
      for s in np.unique(b["segment_ids"][0]):
        if s:
          keys.add(b["tokens"][0][b["segment_ids"][0] == s].tobytes())
    seen.append(keys)
  assert seen[0] and seen[1] and not seen[0] & seen[1]
  assert len(seen[0] | seen[1]) == len(src)


def test_gzip_source_matches_plain(corpus, tmp_path):
  gz = str(tmp_path / "train.jsonl.gz")
  with open(corpus, "rb") as src, gzip.open(gz, "wb") as dst:
    shutil.copyfileobj(src, dst)
  plain, packed = pipeline.TransitionSource(corpus, 1), pipeline.TransitionSource(gz, 1)
  assert len(plain) == len(packed) and plain[7] == packed[7]


def test_truncations_are_counted(corpus, tok):
  cfg = pipeline.PipelineConfig(**{**CFG.__dict__, "max_context_len": 60, "max_target_len": 8})
  ds, rows = pipeline.make_dataset(corpus, tok, cfg)
  next(iter(ds))
  assert rows.truncation.target_cut > 0 and rows.truncation.context_cut > 0


def test_config_rejects_rows_that_cannot_fit():
  with pytest.raises(ValueError, match="seq_len"):
    pipeline.PipelineConfig(batch_size=1, seq_len=100, max_context_len=80,
                            max_target_len=40).validate()


def test_targets_end_at_their_eot_without_fill(corpus, tok):
  (b,) = batches(corpus, tok, 1)
  tokens, target, seg = b["tokens"], b["target_mask"] == 1, b["segment_ids"]
  for r in range(tokens.shape[0]):
    for s in np.unique(seg[r][seg[r] > 0]):
      t = tokens[r][(seg[r] == s) & target[r]]
      # One <eot>, at the end (or none when the target was cut): nothing after it.
      assert np.sum(t == tok.eot_id) <= 1
      assert t[-1] == tok.eot_id or tok.eot_id not in t


def test_block_rows_pack_both_copies(corpus, tok):
  import dataclasses
  from mdlm_wm.data import block_rows
  cfg = dataclasses.replace(CFG, seq_len=160 + 2 * 64, block_size=4)
  (b,) = batches(corpus, tok, 1, cfg)
  assert set(b) == {*block_rows.ROW_FEATURES, "segment_ids", "positions"} - {"pos"}
  seg, role = b["segment_ids"], b["role"]
  for r in range(seg.shape[0]):
    for s in np.unique(seg[r][seg[r] > 0]):
      ex = seg[r] == s
      noisy, clean = ex & (role[r] == block_rows.NOISY), ex & (role[r] == block_rows.CLEAN)
      # The clean copy repeats the noisy slots of every block but the last, at
      # the same positions.
      n = clean.sum()
      assert n % 4 == 0 and noisy.sum() - n <= 4
      np.testing.assert_array_equal(b["tokens"][r][noisy][:n], b["tokens"][r][clean])
      np.testing.assert_array_equal(b["positions"][r][noisy][:n], b["positions"][r][clean])
      # Slot 0 holds the <target> marker (the shift); labels end with <eot>.
      assert b["tokens"][r][noisy][0] == tok.marker_ids["target"]
      labels = b["labels"][r][noisy]
      assert labels[-1] == tok.eot_id or tok.eot_id not in labels
