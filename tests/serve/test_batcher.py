"""The dynamic batcher on its own: no model, no HTTP."""

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from mdlm_wm.serve.batcher import Batcher


class Recorder:
  """A `run` that records its calls and can be held until released."""

  def __init__(self, hold: bool = False, fail_on: object = None):
    self.calls: list[tuple[object, list]] = []
    self.started = threading.Event()
    self.release = threading.Event()
    self.hold, self.fail_on = hold, fail_on

  def __call__(self, key, items):
    self.calls.append((key, list(items)))
    self.started.set()
    if self.hold:
      self.release.wait(10)
    if self.fail_on in items:
      raise ValueError(f"bad item {self.fail_on}")
    return [(key, item * 10) for item in items]


def make(run, max_batch=4, max_wait_s=0.05):
  return Batcher(run, max_batch=max_batch, max_wait_s=max_wait_s,
                 executor=ThreadPoolExecutor(max_workers=1))


def test_concurrent_submissions_share_one_call_and_get_their_own_results():
  run = Recorder()
  batcher = make(run, max_batch=8)

  async def main():
    return await asyncio.gather(*(batcher.submit("k", i) for i in range(5)))

  assert asyncio.run(main()) == [("k", i * 10) for i in range(5)]
  assert run.calls == [("k", [0, 1, 2, 3, 4])]
  assert batcher.stats() == {"calls": 1, "items": 5, "max_batch_size": 5,
                             "batch_sizes": {"5": 1}}


def test_different_keys_never_share_a_call():
  run = Recorder()
  batcher = make(run, max_batch=8)

  async def main():
    return await asyncio.gather(*(batcher.submit(("a", "b")[i % 2], i) for i in range(6)))

  assert asyncio.run(main()) == [(("a", "b")[i % 2], i * 10) for i in range(6)]
  assert sorted(run.calls) == [("a", [0, 2, 4]), ("b", [1, 3, 5])]


def test_max_batch_caps_a_call_and_nothing_is_lost():
  run = Recorder()
  batcher = make(run, max_batch=4)

  async def main():
    return await asyncio.gather(*(batcher.submit("k", i) for i in range(10)))

  assert asyncio.run(main()) == [("k", i * 10) for i in range(10)]
  assert [len(items) for _, items in run.calls] == [4, 4, 2]
  assert [i for _, items in run.calls for i in items] == list(range(10))


def test_a_lone_submission_waits_max_wait_then_runs_alone():
  run = Recorder()
  batcher = make(run, max_batch=4, max_wait_s=0.2)

  async def main():
    start = time.monotonic()
    result = await batcher.submit("k", 7)
    return result, time.monotonic() - start

  result, elapsed = asyncio.run(main())
  assert result == ("k", 70) and run.calls == [("k", [7])]
  assert 0.19 <= elapsed < 5


def test_a_full_batch_does_not_wait():
  run = Recorder()
  batcher = make(run, max_batch=3, max_wait_s=30)

  async def main():
    return await asyncio.wait_for(asyncio.gather(*(batcher.submit("k", i) for i in range(3))), 5)

  assert asyncio.run(main()) == [("k", 0), ("k", 10), ("k", 20)]


def test_submissions_during_a_call_form_the_next_batch():
  run = Recorder(hold=True)
  batcher = make(run, max_batch=8, max_wait_s=0)

  async def main():
    first = asyncio.ensure_future(batcher.submit("k", 0))
    await asyncio.get_running_loop().run_in_executor(None, run.started.wait, 5)
    rest = [asyncio.ensure_future(batcher.submit("k", i)) for i in (1, 2, 3)]
    await asyncio.sleep(0.05)  # all three are queued behind the running call
    run.release.set()
    return await asyncio.gather(first, *rest)

  assert asyncio.run(main()) == [("k", i * 10) for i in range(4)]
  assert run.calls == [("k", [0]), ("k", [1, 2, 3])]


def test_after_a_call_the_wait_restarts_so_just_answered_clients_can_join():
  run = Recorder(hold=True)
  batcher = make(run, max_batch=8, max_wait_s=0.3)

  async def main():
    first = asyncio.ensure_future(batcher.submit("k", 0))
    await asyncio.get_running_loop().run_in_executor(None, run.started.wait, 5)
    waiting = [asyncio.ensure_future(batcher.submit("k", i)) for i in (1, 2)]
    await asyncio.sleep(0.4)  # older than max_wait when the call ends
    run.release.set()
    await first
    return await asyncio.gather(*waiting, batcher.submit("k", 3))  # a client's next request

  assert asyncio.run(main()) == [("k", 10), ("k", 20), ("k", 30)]
  assert run.calls == [("k", [0]), ("k", [1, 2, 3])]


def test_a_failing_call_fails_its_batch_only():
  run = Recorder(fail_on=2)
  batcher = make(run, max_batch=8)

  async def main():
    batch = await asyncio.gather(*(batcher.submit("k", i) for i in range(3)),
                                 return_exceptions=True)
    return batch, await batcher.submit("k", 5)

  batch, later = asyncio.run(main())
  assert all(isinstance(r, ValueError) and "bad item 2" in str(r) for r in batch)
  assert later == ("k", 50)


def test_a_cancelled_submission_costs_no_compute():
  run = Recorder(hold=True)
  batcher = make(run, max_batch=8, max_wait_s=0)

  async def main():
    first = asyncio.ensure_future(batcher.submit("k", 0))
    await asyncio.get_running_loop().run_in_executor(None, run.started.wait, 5)
    gone = asyncio.ensure_future(batcher.submit("k", 1))
    kept = asyncio.ensure_future(batcher.submit("k", 2))
    await asyncio.sleep(0.02)
    gone.cancel()
    run.release.set()
    return await asyncio.gather(first, kept)

  assert asyncio.run(main()) == [("k", 0), ("k", 20)]
  assert run.calls == [("k", [0]), ("k", [2])]


def test_close_fails_pending_submissions():
  run = Recorder()
  batcher = make(run, max_batch=8, max_wait_s=30)

  async def main():
    pending = asyncio.ensure_future(batcher.submit("k", 1))
    await asyncio.sleep(0.02)
    await batcher.close()
    with pytest.raises(RuntimeError, match="shutting down"):
      await pending
    with pytest.raises(RuntimeError, match="closed"):
      await batcher.submit("k", 2)

  asyncio.run(main())
  assert run.calls == []
