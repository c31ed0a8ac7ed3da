"""Settings of the rollout service: batching, request limits, sessions, auth."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class ServeConfig:
  """Everything `app.build_app` needs besides the model.

  Limits are checked before a request reaches the model; each error message
  names the limit (e.g. `num_samples: 64 exceeds max_num_samples=16`).
  """
  # Dynamic batching: a sampler call serves up to `max_batch` step requests
  # that arrive within `max_wait_ms` of the first one.
  max_batch: int = 16
  max_wait_ms: float = 10.0
  # Request limits.
  max_request_bytes: int = 1 << 20
  max_num_samples: int = 16
  max_steps: int = 256
  max_text_chars: int = 20_000
  max_actions: int = 64  # rollout actions
  max_history: int = 64  # (state, action) pairs in a step request
  # Sessions (the server keeps the history).
  max_sessions: int = 1024
  session_ttl_s: float = 900.0
  # Empty: no authentication.
  api_key: str = ""
  # Reported as "model" in responses; empty: the model's objective.
  model_name: str = ""

  def validate(self) -> None:
    for name in ("max_batch", "max_request_bytes", "max_num_samples", "max_steps",
                 "max_text_chars", "max_actions", "max_history", "max_sessions"):
      if getattr(self, name) < 1:
        raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
    if self.max_wait_ms < 0:
      raise ValueError(f"max_wait_ms must be >= 0, got {self.max_wait_ms}")
    if self.session_ttl_s <= 0:
      raise ValueError(f"session_ttl_s must be > 0, got {self.session_ttl_s}")

  def limits(self) -> dict[str, int | float]:
    """The limits as /v1/info reports them."""
    return {name: getattr(self, name) for name in (
        "max_request_bytes", "max_num_samples", "max_steps", "max_text_chars", "max_actions",
        "max_history", "max_sessions", "session_ttl_s", "max_batch", "max_wait_ms")}
