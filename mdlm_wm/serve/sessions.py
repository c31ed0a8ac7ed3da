"""Server-side sessions: one trajectory whose history the server keeps.

A session expires `ttl_s` after its last use; the store holds at most
`max_sessions` (expired ones are swept first, on every access, so an idle
server needs no timer).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import secrets
import time
from collections.abc import Callable

from mdlm_wm.data.schema import Spec
from mdlm_wm.serve.protocol import RequestError, Sampling


@dataclasses.dataclass(eq=False)
class Session:
  id: str
  spec: Spec
  steer: str | None
  sampling: Sampling
  seed: int
  state: str
  max_history: int
  history: collections.deque[tuple[str, str]] = dataclasses.field(default_factory=collections.deque)
  env: str | None = None  # its parser redraws states that do not parse
  steps: int = 0
  last_used: float = 0.0
  # One step at a time: the next step conditions on this one's result.
  lock: asyncio.Lock = dataclasses.field(default_factory=asyncio.Lock)

  def advance(self, action: str, next_state: str) -> None:
    self.history.append((self.state, action))
    while len(self.history) > self.max_history:
      self.history.popleft()
    self.state = next_state
    self.steps += 1

  def step_seed(self) -> int:
    """The seed of the next step (derived as WorldModel.rollout derives its
    per-action seeds): a session is replayable from its seed and actions."""
    return self.seed * 100_003 + self.steps


class SessionStore:
  """Sessions by id, with an idle TTL and a cap on their number."""

  def __init__(self, max_sessions: int, ttl_s: float, max_history: int,
               clock: Callable[[], float] = time.monotonic):
    self.max_sessions, self.ttl_s, self.max_history = max_sessions, ttl_s, max_history
    self._clock = clock
    self._sessions: dict[str, Session] = {}

  def __len__(self) -> int:
    self.sweep()
    return len(self._sessions)

  def create(self, spec: Spec, state: str | None, steer: str | None, sampling: Sampling,
             seed: int, env: str | None = None) -> Session:
    """A new session at `state` (default: the spec's initial state); 429 when full."""
    self.sweep()
    if len(self._sessions) >= self.max_sessions:
      raise RequestError(429, [f"sessions: {len(self._sessions)} open sessions reach the limit "
                               f"max_sessions={self.max_sessions}; delete one or retry later"])
    sid = secrets.token_hex(16)
    session = Session(sid, spec, steer, sampling, seed,
                      state if state is not None else spec.initial_state, self.max_history,
                      env=env, last_used=self._clock())
    self._sessions[sid] = session
    return session

  def get(self, sid: str) -> Session:
    """The live session `sid`, marked as used now; 404 when unknown or expired."""
    self.sweep()
    session = self._sessions.get(sid)
    if session is None:
      raise RequestError(404, [f"session_id: unknown or expired session {sid!r}"])
    session.last_used = self._clock()
    return session

  def delete(self, sid: str) -> None:
    self.sweep()
    if self._sessions.pop(sid, None) is None:
      raise RequestError(404, [f"session_id: unknown or expired session {sid!r}"])

  def sweep(self) -> int:
    """Drops expired sessions; returns how many."""
    deadline = self._clock() - self.ttl_s
    expired = [sid for sid, s in self._sessions.items() if s.last_used < deadline]
    for sid in expired:
      del self._sessions[sid]
    return len(expired)
