"""The grain input pipeline: transitions -> packed, batched token rows.

An example is `[context][target]` where the target is the next state and
its <eot>, nothing after it (no fill: a loss over <eot> fill is mostly length
prediction), or, for the block-diffusion objective (`block_size` > 0), the
`[context | noisy target | clean target]` row of `diffusion/block.py`.
Examples are packed
first-fit into `seq_len` bins, so a batch is not mostly padding; packed rows
carry `segment_ids` (0 = padding) and per-segment `positions` that the model
uses to keep attention inside each example.

Deterministic and resumable: the order depends only on the seed, and the
iterator's `get_state()` restores to the same next batch. Sharded per process:
process p of P reads examples p, p+P, ... of the shuffled index (or, with
`make_sharded_dataset`, data shards fixed independently of P).
"""

from __future__ import annotations

import array
import dataclasses
import functools
import gzip
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Sequence

import grain
import numpy as np

from mdlm_wm.data import schema
from mdlm_wm.data import block_rows
from mdlm_wm.data.serialize import Serializer, Transition, Truncation, transition_at
from mdlm_wm.data.tokenizer import Tokenizer


class TransitionSource:
  """Random access to every transition of one or more JSONL files.

  One streaming pass validates the files and records each line's byte offset
  and step count; items are then read with a seek, so memory holds the index
  (12 bytes per transition), never the corpus. A `.gz` file is decompressed
  once to a temporary file because gzip cannot seek.
  """

  def __init__(self, paths: str | Sequence[str], history_len: int):
    self.paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    self.history_len = history_len
    self._tmp = []
    self._files = []
    # array, not list: a list of Python ints costs ~10x the memory.
    line_offsets, step_idx, file_idx = array.array("q"), array.array("i"), array.array("h")
    for fi, path in enumerate(self.paths):
      readable = self._seekable_copy(path)
      self._files.append(readable)
      for offset, ep in schema.iter_records(readable, name=str(path)):
        line_offsets.extend([offset] * len(ep.steps))
        step_idx.extend(range(len(ep.steps)))
        file_idx.extend([fi] * len(ep.steps))
    if not line_offsets:
      raise schema.SchemaError([f"{', '.join(map(str, self.paths))}: no transitions"])
    self._offsets = np.frombuffer(line_offsets, np.int64)
    self._steps = np.frombuffer(step_idx, np.int32)
    self._file = np.frombuffer(file_idx, np.int16)
    self._local = threading.local()

  def _seekable_copy(self, path: str) -> str:
    if not str(path).endswith(".gz"):
      return str(path)
    fd, tmp = tempfile.mkstemp(suffix=".jsonl")
    with os.fdopen(fd, "wb") as out, gzip.open(path, "rb") as src:
      shutil.copyfileobj(src, out)
    self._tmp.append(tmp)
    return tmp

  def __del__(self):
    for tmp in getattr(self, "_tmp", []):
      try:
        os.remove(tmp)
      except OSError:
        pass

  def __len__(self) -> int:
    return len(self._offsets)

  def __getitem__(self, i: int) -> Transition:
    i = int(i)
    ep = self._episode(int(self._file[i]), int(self._offsets[i]))
    return transition_at(ep, int(self._steps[i]), self.history_len)

  def _episode(self, fi: int, offset: int) -> schema.Episode:
    # Consecutive indices usually hit the same episode; remember the last one
    # per thread (grain reads from a thread pool).
    cache = getattr(self._local, "cache", None)
    if cache is not None and cache[0] == (fi, offset):
      return cache[1]
    with open(self._files[fi], "rb") as f:
      f.seek(offset)
      ep = schema.episode_from_dict(json.loads(f.readline()))
    self._local.cache = ((fi, offset), ep)
    return ep

  def __getstate__(self):
    state = self.__dict__.copy()
    del state["_local"]
    state["_tmp"] = []  # the copy does not own the temporary files
    return state

  def __setstate__(self, state):
    self.__dict__.update(state)
    self._local = threading.local()


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
  batch_size: int
  seq_len: int
  max_context_len: int
  max_target_len: int
  history_len: int = 2
  tools_format: str = "signature"  # data/serialize.py TOOLS_FORMATS
  ablate: tuple[str, ...] = ()  # anchors never read (data/serialize.py ANCHORS)
  target: str = "state"  # or "delta": s_{t+1} as its change from s_t (data/delta.py)
  # > 0: block-diffusion rows with blocks of this many slots (>= max_target_len:
  # the full canvas); 0: plain [context][target] rows (the AR objective).
  block_size: int = 0
  shift: bool = True  # block rows only: slot j holds the token before label j
  clean_labels: bool = False  # block rows only: a whole, labelled clean copy
  seed: int = 0
  num_epochs: int | None = None  # None: repeat forever
  shuffle: bool = True
  read_threads: int = 4
  # First-fit packing over this many rows at once (a multiple of batch_size
  # is best); more bins, less padding.
  packing_bins: int = 0  # 0: 4 x batch_size

  def validate(self) -> None:
    block_rows.check_seq_len(self.seq_len, self.max_context_len, self.max_target_len,
                             block=bool(self.block_size))

  def features(self) -> tuple[str, ...]:
    return block_rows.ROW_FEATURES if self.block_size else ("tokens", "target_mask", "steer_mask")


class _ToRow(grain.transforms.Map):
  """Serializes a transition into the unpacked row features (thread-safe counts)."""

  def __init__(self, serializer: Serializer, cfg: PipelineConfig):
    self.serializer = serializer
    self.cfg = cfg
    self.truncation = Truncation()
    self._lock = threading.Lock()

  def map(self, tr: Transition) -> dict[str, np.ndarray]:
    ser = self.serializer.serialize(tr)
    with self._lock:
      self.truncation.add(ser.truncation)
    if self.cfg.block_size:
      return block_rows.block_row(ser.context_ids, ser.target_ids, self.cfg.block_size,
                                  self.cfg.shift, ser.steer_span, self.cfg.clean_labels)
    tokens = np.asarray(ser.context_ids + ser.target_ids, np.int32)
    mask = np.zeros_like(tokens)
    mask[len(ser.context_ids):] = 1
    # The steer's content tokens, so training can drop z (classifier-free
    # guidance) by hiding them from attention.
    steer = np.zeros_like(tokens)
    steer[slice(*ser.steer_span)] = 1
    return {"tokens": tokens, "target_mask": mask, "steer_mask": steer}


def make_dataset(paths: str | Sequence[str], tokenizer: Tokenizer, cfg: PipelineConfig, *,
                 process_index: int = 0, process_count: int = 1,
                 source: TransitionSource | None = None):
  """Returns (grain IterDataset of packed batches, row transform with truncation counts).

  Batches are dicts of int32 [batch_size, seq_len] arrays: `tokens`,
  `target_mask` (1 on target positions), `steer_mask` (1 on the steer's
  content tokens), `segment_ids` (0 = padding) and `positions`; block rows
  carry `data.block_rows.ROW_FEATURES` instead of `target_mask`, and their
  `positions` are the rows' own `pos` (the two target copies share them).
  """
  cfg.validate()
  src = source or TransitionSource(paths, cfg.history_len)
  serializer = Serializer(tokenizer, cfg.max_context_len, cfg.max_target_len, cfg.history_len,
                          cfg.tools_format, cfg.ablate, cfg.target)
  to_row = _ToRow(serializer, cfg)
  ds = grain.MapDataset.source(src)
  if cfg.shuffle:
    ds = ds.shuffle(seed=cfg.seed)
  ds = ds[process_index::process_count]
  if cfg.num_epochs != 1:
    ds = ds.repeat(cfg.num_epochs)
  ds = ds.map(to_row)
  it = ds.to_iter_dataset(grain.ReadOptions(num_threads=cfg.read_threads, prefetch_buffer_size=64))
  it = grain.experimental.FirstFitPackIterDataset(
      it, length_struct={k: cfg.seq_len for k in cfg.features()},
      num_packing_bins=cfg.packing_bins or 4 * cfg.batch_size, shuffle_bins=False)
  it = it.batch(cfg.batch_size, drop_remainder=True,
                batch_fn=functools.partial(_collate, features=cfg.features()))
  return it, to_row


def make_sharded_dataset(paths: str | Sequence[str], tokenizer: Tokenizer, cfg: PipelineConfig, *,
                         shard_ids: Sequence[int], shard_count: int):
  """This process's rows of every global batch: data shards `shard_ids` of `shard_count`.

  Shard i is `make_dataset` with process_index=i, process_count=shard_count
  (cfg.batch_size rows each); a process reading several shards concatenates
  their batches in shard order. A global batch is shards 0..S-1 in order,
  whichever process reads which, so with S fixed a run gives the same batches
  on any number of processes that divides S (and `relayout_state` moves a
  checkpointed position between such layouts). Returns (dataset, the shards'
  row transforms).
  """
  src = TransitionSource(paths, cfg.history_len)
  parts = [make_dataset(paths, tokenizer, cfg, process_index=i, process_count=shard_count,
                        source=src) for i in shard_ids]
  datasets, rows = zip(*parts)
  if len(datasets) == 1:
    return datasets[0], list(rows)
  return grain.experimental.ZipIterDataset(list(datasets)).map(_concat), list(rows)


def relayout_state(saved: Sequence[dict], shard_count: int, shard_ids: Sequence[int]) -> dict:
  """The iterator state of `make_sharded_dataset(shard_ids=...)` from the states
  of another layout of the same `shard_count` shards (`saved`: one per process,
  in process order). A process reading one shard saves that shard's grain state,
  one reading several saves the zip's {"parents": [...]}.
  """
  if shard_count % len(saved):
    raise ValueError(f"{len(saved)} saved data states cannot hold {shard_count} shards")
  per_process = shard_count // len(saved)
  shards = [s for state in saved for s in ([state] if per_process == 1 else state["parents"])]
  mine = [shards[i] for i in shard_ids]
  return mine[0] if len(mine) == 1 else {"parents": mine}


def _concat(batches: Sequence[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
  return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


def _collate(rows: Sequence[dict[str, np.ndarray]], features: Sequence[str]
             ) -> dict[str, np.ndarray]:
  stack = lambda k: np.stack([r[k] for r in rows]).astype(np.int32)
  out = {k: stack(k) for k in features}
  out["segment_ids"] = stack("tokens_segment_ids")
  out["positions"] = out.pop("pos") if "pos" in out else stack("tokens_positions")
  return out


def padding_fraction(batch: dict[str, np.ndarray]) -> float:
  """Fraction of positions in a packed batch that hold no example."""
  return float(np.mean(batch["segment_ids"] == 0))
