r"""A small client for the rollout service (`python -m launch.serve`), stdlib only.

    from examples.client import WorldModelClient
    wm = WorldModelClient("http://127.0.0.1:8000", api_key="KEY")
    states = wm.step(spec, state, 'open(target="fridge")', num_samples=4)
    trajectories = wm.rollout(spec, ["look", "go north"], num_samples=2)
    with wm.session(spec) as s:           # the server keeps the history
      print(s.step("look"), s.step("go north"))

`spec` is the trajectory format's spec object (a dict; docs/schema.md). Try it
against a running server on the first episode of a trajectory file, from the
repository root:

    python -m examples.client --url=http://127.0.0.1:8000 --data=/tmp/corpus/test.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any


class ServiceError(Exception):
  """A refused request: the HTTP status and the server's `key.path: message` lines."""

  def __init__(self, status: int, errors: list[str]):
    self.status, self.errors = status, errors
    super().__init__(f"HTTP {status}: " + "; ".join(errors))


class WorldModelClient:
  """Calls a rollout service; the API key defaults to $MDLM_WM_API_KEY."""

  def __init__(self, url: str = "http://127.0.0.1:8000", api_key: str | None = None,
               timeout_s: float = 300.0):
    self.url = url.rstrip("/")
    self.api_key = api_key if api_key is not None else os.environ.get("MDLM_WM_API_KEY", "")
    self.timeout_s = timeout_s

  def request(self, method: str, path: str, body: dict | None = None) -> dict[str, Any]:
    data = None if body is None else json.dumps(body).encode("utf-8")
    headers = {"Content-Type": "application/json"}
    if self.api_key:
      headers["Authorization"] = f"Bearer {self.api_key}"
    req = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
    try:
      with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
        return json.loads(resp.read())
    except urllib.error.HTTPError as e:
      raw = e.read()
      try:
        errors = json.loads(raw)["errors"]
      except (ValueError, KeyError, TypeError):
        errors = [raw.decode("utf-8", "replace") or e.reason]
      raise ServiceError(e.code, errors) from None

  def health(self) -> dict[str, Any]:
    return self.request("GET", "/v1/health")

  def info(self) -> dict[str, Any]:
    return self.request("GET", "/v1/info")

  def step(self, spec: dict, state: str, action: str, *,
           history: Sequence[tuple[str, str]] = (), steer: str | None = None,
           fixed: dict | None = None, num_samples: int = 1, **sampling) -> list[str]:
    """`num_samples` predicted next states. `fixed` pins anchors ({"prefix",
    "suffix", "length", "spans"}); `sampling`: temperature, steps (MDLM), seed."""
    body = {"spec": spec, "history": [list(p) for p in history], "state": state,
            "action": action, "num_samples": num_samples, **_given(steer=steer, fixed=fixed),
            **_given(**sampling)}
    return self.request("POST", "/v1/step", body)["next_states"]

  def rollout(self, spec: dict, actions: Sequence[str], *, state: str | None = None,
              steer: str | None = None, num_samples: int = 1, **sampling) -> list[list[str]]:
    """Per sample, the predicted state after each action (open loop)."""
    body = {"spec": spec, "actions": list(actions), "num_samples": num_samples,
            **_given(state=state, steer=steer), **_given(**sampling)}
    return self.request("POST", "/v1/rollout", body)["trajectories"]

  def session(self, spec: dict, *, state: str | None = None, steer: str | None = None,
              **sampling) -> Session:
    """A server-side session (one trajectory); close it, or use it as a context manager."""
    body = {"spec": spec, **_given(state=state, steer=steer), **_given(**sampling)}
    out = self.request("POST", "/v1/sessions", body)
    return Session(self, out["session_id"], out["state"])


class Session:
  """One trajectory whose history the server keeps."""

  def __init__(self, client: WorldModelClient, session_id: str, state: str):
    self.client, self.id, self.state = client, session_id, state

  def step(self, action: str, fixed: dict | None = None) -> str:
    out = self.client.request("POST", f"/v1/sessions/{self.id}/step",
                              {"action": action, **_given(fixed=fixed)})
    self.state = out["next_state"]
    return self.state

  def history(self) -> list[tuple[str, str]]:
    return [tuple(p) for p in self.client.request("GET", f"/v1/sessions/{self.id}")["history"]]

  def close(self) -> None:
    self.client.request("DELETE", f"/v1/sessions/{self.id}")

  def __enter__(self) -> Session:
    return self

  def __exit__(self, *exc) -> None:
    self.close()


def _given(**fields) -> dict[str, Any]:
  """The fields the caller set: the server applies its defaults to the rest."""
  return {k: v for k, v in fields.items() if v is not None}


def example_args(description: str) -> tuple[str, dict[str, Any]]:
  """The examples' command line (--url, --data): the server URL and the first
  episode of the trajectory file."""
  parser = argparse.ArgumentParser(description=description.split("\n\n")[0])
  parser.add_argument("--url", default="http://127.0.0.1:8000")
  parser.add_argument("--data", required=True, help="a trajectory file (.jsonl; docs/schema.md)")
  args = parser.parse_args()
  with open(args.data, encoding="utf-8") as f:
    return args.url, json.loads(f.readline())


def main() -> None:
  url, episode = example_args(__doc__)
  spec, steps = episode["spec"], episode["steps"]
  client = WorldModelClient(url)
  print("info:", json.dumps(client.info(), indent=1))
  print("step:", client.step(spec, steps[0]["state"], steps[0]["action"], num_samples=2))
  print("rollout:", client.rollout(spec, [s["action"] for s in steps[:3]], num_samples=2))
  with client.session(spec) as session:
    for s in steps[:3]:
      print(f"session> {s['action']}\n{session.step(s['action'])}")


if __name__ == "__main__":
  main()
