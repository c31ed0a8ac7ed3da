"""Concurrent clients against the real server: nothing lost, batching happens, and
batching does not change what a request gets."""

from __future__ import annotations

import collections
import threading
import time

import numpy as np
import pytest

from mdlm_wm.data import schema
from mdlm_wm.data.serialize import Transition
from mdlm_wm.serve.app import build_app
from mdlm_wm.serve.config import ServeConfig
from mdlm_wm.serve.engine import StepJob
from mdlm_wm.serve.protocol import Sampling
from mdlm_wm.world_model import WorldModel
from tests.serve.conftest import Served, running


def run_load(served: Served, body: dict, clients: int, per_client: int) -> dict:
  """`clients` threads, each sending `per_client` /v1/step requests in turn
  (`body` with a distinct seed each).

  Returns the responses, latencies and the batch sizes of the sampler calls
  made meanwhile, and prints latency percentiles and throughput.
  """
  batcher = served.app.state.batcher
  before = collections.Counter(batcher.batch_sizes)
  results: list[tuple[int, dict, float]] = []
  lock = threading.Lock()

  def client(k: int) -> None:
    with served.client() as c:
      for i in range(per_client):
        start = time.perf_counter()
        r = c.post("/v1/step", json={**body, "seed": k * per_client + i})
        elapsed = time.perf_counter() - start
        with lock:
          results.append((r.status_code, r.json(), elapsed))

  threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
  start = time.perf_counter()
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  wall = time.perf_counter() - start
  sizes = collections.Counter(batcher.batch_sizes)
  sizes.subtract(before)
  sizes = {n: c for n, c in sorted(sizes.items()) if c}
  latency = np.array([e for _, _, e in results])
  print(f"\n[load] {served.app.state.engine.wm.objective}: {clients} clients x {per_client} "
        f"requests = {len(results)} in {wall:.2f} s: {len(results) / wall:.2f} requests/s, "
        f"latency p50 {np.percentile(latency, 50):.3f} s p99 {np.percentile(latency, 99):.3f} s, "
        f"sampler calls by batch size {sizes}")
  return {"results": results, "sizes": sizes}


def check_load(out: dict, requests: int, wm: WorldModel, episode: schema.Episode) -> None:
  statuses = [status for status, _, _ in out["results"]]
  assert statuses == [200] * requests, [r for r in out["results"] if r[0] != 200][:3]
  assert sorted(body["seed"] for _, body, _ in out["results"]) == list(range(requests))
  # Every request was served by exactly one call, and some call served several.
  assert sum(n * c for n, c in out["sizes"].items()) == requests
  assert max(out["sizes"]) > 1
  batched = [body for _, body, _ in out["results"] if body["batch_size"] > 1]
  assert batched
  # Batching did not change what a request got: the same as served alone.
  s = episode.steps[0]
  tr = Transition(episode.spec, (), s.state, s.action)
  for body in batched[:3]:
    assert body["next_states"] == wm.generate([tr], seed=[body["seed"]])[0]


def test_concurrent_steps_are_batched_and_none_is_lost(mdlm_server, mdlm_wm, episode, step_body):
  out = run_load(mdlm_server, step_body, clients=8, per_client=3)
  check_load(out, 8 * 3, mdlm_wm, episode)


@pytest.mark.slow
@pytest.mark.parametrize("objective", ["mdlm", "ar"])
def test_sixteen_clients_twenty_requests_each(objective, mdlm_wm, ar_wm, episode, step_body):
  wm = {"mdlm": mdlm_wm, "ar": ar_wm}[objective]
  app = build_app(wm, ServeConfig(max_batch=16, max_wait_ms=20))
  # Compile every batch shape first, so the figures measure serving, not XLA.
  engine, s = app.state.engine, episode.steps[0]
  job = StepJob(Transition(episode.spec, (), s.state, s.action), None, None, seed=0)
  for n in (1, 2, 4, 8, 16):
    engine.run_steps(engine.batch_key(Sampling()), [job] * n)
  with running(app) as served:
    out = run_load(served, step_body, clients=16, per_client=20)
  check_load(out, 16 * 20, wm, episode)
