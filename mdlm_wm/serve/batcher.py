"""Dynamic batching: concurrent submissions served by one call per batch.

Submissions carry a key; a call only ever serves submissions with equal keys
(the model can only share a sampler call between requests with the same
sampler settings). The oldest pending submission decides what runs next: its
batch leaves once `max_batch` submissions with its key are pending, or
`max_wait_s` after it arrived or after the previous call ended, whichever is
later, if that comes first. Calls run one at a time on `executor` (the model
is one device), so the event loop stays free and submissions that arrive
during a call form the next batch. Counting the wait from the end of the
previous call lets the clients that call just answered join the next batch:
without it, under a closed loop of N clients, the few requests that missed a
call go alone the moment it ends and the batches settle into a big/small
alternation (measured: 13 + 3 for 16 clients).

The batcher knows nothing about models or HTTP: `run(key, items)` returns one
result per item, in order.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import dataclasses
from collections.abc import Callable, Hashable, Sequence
from typing import Any


@dataclasses.dataclass(eq=False)
class _Pending:
  key: Hashable
  item: Any
  future: asyncio.Future
  arrived: float


class Batcher:
  """Collects `submit`ted items into calls of `run` (see the module docstring)."""

  def __init__(self, run: Callable[[Hashable, Sequence[Any]], Sequence[Any]], *, max_batch: int,
               max_wait_s: float, executor: concurrent.futures.Executor):
    if max_batch < 1:
      raise ValueError(f"max_batch must be >= 1, got {max_batch}")
    self._run, self.max_batch, self.max_wait_s = run, max_batch, max_wait_s
    self._executor = executor
    self._pending: collections.deque[_Pending] = collections.deque()
    self._wakeup: asyncio.Event | None = None
    self._task: asyncio.Task | None = None
    self._idle_since = float("-inf")  # when the last call ended
    self.batch_sizes: collections.Counter[int] = collections.Counter()

  async def submit(self, key: Hashable, item: Any) -> Any:
    """Waits for the call that serves `item` and returns its result (or raises
    what the call raised)."""
    loop = asyncio.get_running_loop()
    if self._task is None:
      self._wakeup = asyncio.Event()
      self._task = loop.create_task(self._loop())
    if self._task.done():
      raise RuntimeError("the batcher is closed")
    pending = _Pending(key, item, loop.create_future(), loop.time())
    self._pending.append(pending)
    self._wakeup.set()
    return await pending.future

  def stats(self) -> dict[str, Any]:
    """Calls made, items served, and how many calls served each batch size."""
    return {"calls": sum(self.batch_sizes.values()),
            "items": sum(n * c for n, c in self.batch_sizes.items()),
            "max_batch_size": max(self.batch_sizes, default=0),
            "batch_sizes": {str(n): c for n, c in sorted(self.batch_sizes.items())}}

  async def close(self) -> None:
    """Stops batching; items still pending fail with RuntimeError."""
    if self._task is not None:
      self._task.cancel()
      try:
        await self._task
      except asyncio.CancelledError:
        pass
    _fail(self._pending, RuntimeError("the server is shutting down"))
    self._pending.clear()

  async def _loop(self) -> None:
    loop = asyncio.get_running_loop()
    while True:
      # A client that went away cancelled its future: drop it before it costs compute.
      self._pending = collections.deque(p for p in self._pending if not p.future.done())
      if not self._pending:
        self._wakeup.clear()
        await self._wakeup.wait()
        continue
      oldest = self._pending[0]
      same = [p for p in self._pending if p.key == oldest.key][:self.max_batch]
      wait_s = max(oldest.arrived, self._idle_since) + self.max_wait_s - loop.time()
      if len(same) < self.max_batch and wait_s > 0:
        self._wakeup.clear()
        try:
          await asyncio.wait_for(self._wakeup.wait(), wait_s)
        except TimeoutError:
          pass
        continue
      taken = set(map(id, same))
      self._pending = collections.deque(p for p in self._pending if id(p) not in taken)
      await self._serve(oldest.key, same)
      self._idle_since = loop.time()

  async def _serve(self, key: Hashable, batch: list[_Pending]) -> None:
    loop = asyncio.get_running_loop()
    self.batch_sizes[len(batch)] += 1
    try:
      results = await loop.run_in_executor(self._executor, self._run, key,
                                           [p.item for p in batch])
      if len(results) != len(batch):
        raise RuntimeError(f"the batch call returned {len(results)} results for "
                           f"{len(batch)} items")
    except asyncio.CancelledError:
      _fail(batch, RuntimeError("the server is shutting down"))
      raise
    except Exception as e:  # every waiter learns why, and the loop lives on
      _fail(batch, e)
      return
    for p, result in zip(batch, results):
      if not p.future.done():
        p.future.set_result(result)


def _fail(batch: Sequence[_Pending], error: Exception) -> None:
  for p in batch:
    if not p.future.done():
      p.future.set_exception(error)
