"""A dependency-free progress line for long host-side loops (corpus building, eval)."""

from __future__ import annotations

import sys
import time


class Progress:
  """Prints `label: done/total (rate/s, eta)` at most every `interval` seconds.

  Writes to stderr so stdout stays parseable; on a non-terminal stream each
  update is a line of its own rather than a carriage-return overwrite.
  """

  def __init__(self, label: str, total: int | None = None, unit: str = "it",
               interval: float = 1.0, stream=None):
    self.label, self.total, self.unit, self.interval = label, total, unit, interval
    self.stream = stream or sys.stderr
    self.done = 0
    self.start = self._last = time.perf_counter()

  def update(self, n: int = 1) -> None:
    self.done += n
    now = time.perf_counter()
    if now - self._last >= self.interval:
      self._last = now
      self._print(final=False)

  def close(self) -> float:
    """Prints the final line; returns the rate in units per second."""
    self._print(final=True)
    return self.rate

  @property
  def rate(self) -> float:
    return self.done / max(time.perf_counter() - self.start, 1e-9)

  def _print(self, final: bool) -> None:
    of = f"/{self.total}" if self.total is not None else ""
    eta = ""
    if self.total and not final and self.rate > 0:
      eta = f", eta {(self.total - self.done) / self.rate:.0f}s"
    tty = self.stream.isatty()
    end = "\n" if final or not tty else ""
    prefix = "\r" if tty else ""
    self.stream.write(f"{prefix}{self.label}: {self.done}{of} {self.unit} "
                      f"({self.rate:.1f} {self.unit}/s{eta}){end}")
    self.stream.flush()
