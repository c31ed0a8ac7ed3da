"""Metric sinks: WORKDIR/metrics.jsonl, TensorBoard event files, a terminal line."""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterator


class MetricsWriter:
  """Appends one JSON object per logged step; mirrors scalars to TensorBoard.

  On resume, lines for steps after the restored step are dropped first, so
  the file describes exactly one run history with no duplicated steps.
  """

  def __init__(self, workdir: str, resume_step: int | None = None, tensorboard: bool = True):
    self.path = os.path.join(workdir, "metrics.jsonl")
    os.makedirs(workdir, exist_ok=True)
    if resume_step is not None and os.path.exists(self.path):
      self._truncate_after(resume_step)
    elif resume_step is None and os.path.exists(self.path):
      os.remove(self.path)  # a fresh run in a workdir without checkpoints
    self._f = open(self.path, "a", encoding="utf-8")
    self._tb = None
    if tensorboard:
      from tensorboardX import SummaryWriter  # pylint: disable=import-outside-toplevel
      self._tb = SummaryWriter(os.path.join(workdir, "tensorboard"))

  def _truncate_after(self, step: int) -> None:
    keep = []
    with open(self.path, encoding="utf-8") as f:
      for line in f:
        try:
          if json.loads(line).get("step", 0) <= step:
            keep.append(line)
        except json.JSONDecodeError:
          break  # a line cut by a crash ends the usable history
    tmp = self.path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
      f.writelines(keep)
    os.replace(tmp, self.path)

  def logged_keys(self, step: int) -> set[str]:
    """Every key of the rows already written for `step`."""
    keys: set[str] = set()
    with open(self.path, encoding="utf-8") as f:
      for line in f:
        row = json.loads(line)
        if row.get("step") == step:
          keys.update(row)
    return keys

  def write(self, step: int, metrics: dict) -> None:
    row = {"step": int(step)}
    for k, v in metrics.items():
      v = float(v) if not isinstance(v, str) else v
      row[k] = v if isinstance(v, str) or math.isfinite(v) else str(v)
      if self._tb is not None and not isinstance(v, str):
        self._tb.add_scalar(k, v, step)
    self._f.write(json.dumps(row) + "\n")
    self._f.flush()

  def close(self) -> None:
    self._f.close()
    if self._tb is not None:
      self._tb.close()


class Throughput:
  """Tokens per second of training over the window since the last `rate()`.

  Tokens are added when their step is known to be finished (its metrics were
  fetched), so a window never counts a step whose time it has not seen; time
  spent inside `paused()` (evaluation) is left out of the window.
  """

  def __init__(self, clock: Callable[[], float] = time.perf_counter):
    self._clock = clock
    self._t0 = clock()
    self._tokens = 0
    self._paused = 0.0

  def add(self, tokens: int) -> None:
    self._tokens += tokens

  @contextlib.contextmanager
  def paused(self) -> Iterator[None]:
    t = self._clock()
    try:
      yield
    finally:
      self._paused += self._clock() - t

  def rate(self) -> float:
    """The window's tokens/s; starts the next window."""
    now = self._clock()
    rate = self._tokens / max(now - self._t0 - self._paused, 1e-9)
    self._t0, self._tokens, self._paused = now, 0, 0.0
    return rate


class StepProgress:
  """`step N/T loss .. tok/s .. eta ..` on stderr, at most once per `interval` s."""

  def __init__(self, total: int, start: int = 0, interval: float = 2.0, stream=None,
               keys: tuple[str, ...] = ("loss", "valid_loss", "tokens_per_sec")):
    self.total, self.start_step, self.interval, self.keys = total, start, interval, keys
    self.stream = stream or sys.stderr
    self.t0 = self._last = time.perf_counter()

  def update(self, step: int, metrics: dict, force: bool = False) -> None:
    now = time.perf_counter()
    if not force and now - self._last < self.interval:
      return
    self._last = now
    done = step - self.start_step
    rate = done / max(now - self.t0, 1e-9)
    eta = (self.total - step) / rate if rate > 0 else float("inf")
    shown = " ".join(f"{k} {v:.4g}" for k, v in metrics.items()
                     if k in self.keys)
    self.stream.write(f"step {step}/{self.total} {shown} eta {eta:.0f}s\n")
    self.stream.flush()
