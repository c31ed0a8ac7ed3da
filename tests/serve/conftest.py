"""Fixtures: the tiny world models behind a real uvicorn server on a free port."""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from mdlm_wm.data import schema
from mdlm_wm.data.serialize import Transition
from mdlm_wm.serve.app import build_app
from mdlm_wm.serve.config import ServeConfig
from mdlm_wm.world_model import WorldModel

API_KEY = "test-key"
AUTH = {"Authorization": f"Bearer {API_KEY}"}
# Small limits, so tests can cross each one cheaply; the corpus' longest text
# field is under 500 characters and its largest spec under 4 KB.
TEST_CONFIG = ServeConfig(max_batch=2, max_wait_ms=50, max_request_bytes=32 * 1024,
                          max_num_samples=4, max_steps=16, max_text_chars=1000, max_actions=4,
                          max_history=4, max_sessions=3, api_key=API_KEY)


@dataclasses.dataclass
class Served:
  url: str
  app: FastAPI

  def client(self, headers: dict[str, str] | None = AUTH) -> httpx.Client:
    # First calls compile the sampler: generous timeout.
    return httpx.Client(base_url=self.url, headers=headers, timeout=300)


def replay(wm: WorldModel, spec: schema.Spec, state: str, actions: list[str], seed: int,
           **kwargs) -> list[str]:
  """What a session seeded `seed` must answer, stepped with the library:
  step k draws with per-transition seed `seed * 100_003 + k`."""
  history, out = [], []
  for k, action in enumerate(actions):
    tr = Transition(spec, tuple(history), state, action)
    (next_state,), = wm.generate([tr], seed=[seed * 100_003 + k], **kwargs)
    history.append((state, action))
    state = next_state
    out.append(state)
  return out


def free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


@contextlib.contextmanager
def running(app: FastAPI) -> Iterator[Served]:
  """Serves `app` with uvicorn on a thread until the block ends."""
  server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(),
                                         log_level="warning"))
  thread = threading.Thread(target=server.run, daemon=True)
  thread.start()
  deadline = time.monotonic() + 60
  while not server.started:
    if not thread.is_alive() or time.monotonic() > deadline:
      raise RuntimeError("uvicorn did not start")
    time.sleep(0.02)
  try:
    yield Served(f"http://127.0.0.1:{server.config.port}", app)
  finally:
    server.should_exit = True
    thread.join(timeout=60)


@pytest.fixture(scope="session")
def episode(tiny_corpus) -> schema.Episode:
  return next(ep for ep in schema.iter_episodes(f"{tiny_corpus}/test.jsonl") if len(ep.steps) >= 3)


@pytest.fixture(scope="session")
def spec_dict(episode) -> dict:
  return schema.episode_to_dict(episode)["spec"]


@pytest.fixture(scope="session")
def step_body(episode, spec_dict) -> dict:
  """A valid /v1/step body (no seed: batchable)."""
  s = episode.steps[0]
  return {"spec": spec_dict, "state": s.state, "action": s.action}


@pytest.fixture(scope="session")
def mdlm_wm(tiny_models) -> WorldModel:
  return WorldModel.load(tiny_models["mdlm"])


@pytest.fixture(scope="session")
def ar_wm(tiny_models) -> WorldModel:
  return WorldModel.load(tiny_models["ar"])


@pytest.fixture(scope="session")
def mdlm_server(mdlm_wm) -> Iterator[Served]:
  with running(build_app(mdlm_wm, TEST_CONFIG)) as served:
    yield served


@pytest.fixture(scope="session")
def ar_server(ar_wm) -> Iterator[Served]:
  with running(build_app(ar_wm, TEST_CONFIG)) as served:
    yield served
