"""The session store: idle TTL, the cap, history kept per session."""

import pytest

from mdlm_wm.data.schema import Spec
from mdlm_wm.serve.protocol import RequestError, Sampling
from mdlm_wm.serve.sessions import SessionStore

SPEC = Spec("start", "task")


class Clock:
  def __init__(self):
    self.now = 1000.0

  def __call__(self) -> float:
    return self.now


def test_a_session_expires_after_its_idle_ttl_and_use_extends_it():
  clock = Clock()
  store = SessionStore(max_sessions=4, ttl_s=10, max_history=8, clock=clock)
  s = store.create(SPEC, None, None, Sampling(), 0)
  assert s.state == "start"
  clock.now += 9
  assert store.get(s.id) is s  # used: the TTL starts again
  clock.now += 9
  assert store.get(s.id) is s
  clock.now += 10.5
  with pytest.raises(RequestError) as e:
    store.get(s.id)
  assert e.value.status == 404 and "unknown or expired session" in e.value.errors[0]
  assert len(store) == 0


def test_the_cap_refuses_new_sessions_until_one_is_deleted_or_expires():
  clock = Clock()
  store = SessionStore(max_sessions=2, ttl_s=10, max_history=8, clock=clock)
  first = store.create(SPEC, "s", None, Sampling(), 0)
  store.create(SPEC, "s", None, Sampling(), 0)
  with pytest.raises(RequestError) as e:
    store.create(SPEC, "s", None, Sampling(), 0)
  assert e.value.status == 429 and "max_sessions=2" in e.value.errors[0]
  store.delete(first.id)
  store.create(SPEC, "s", None, Sampling(), 0)
  clock.now += 11
  assert store.sweep() == 2 and len(store) == 0
  with pytest.raises(RequestError, match="unknown or expired"):
    store.delete(first.id)


def test_advance_keeps_the_last_max_history_pairs_and_derives_step_seeds():
  store = SessionStore(max_sessions=1, ttl_s=10, max_history=2)
  s = store.create(SPEC, None, None, Sampling(), seed=5)
  assert s.step_seed() == 5 * 100_003
  for k in range(3):
    s.advance(f"a{k}", f"s{k + 1}")
  assert list(s.history) == [("s1", "a1"), ("s2", "a2")] and s.state == "s3" and s.steps == 3
  assert s.step_seed() == 5 * 100_003 + 3
