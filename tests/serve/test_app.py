"""The real server (uvicorn on a free port) over HTTP: answers, errors, auth, sessions."""

import os
import signal
import subprocess
import sys
import time

import httpx
import pytest

from mdlm_wm.data.serialize import Transition
from mdlm_wm.serve.app import build_app
from mdlm_wm.serve.config import ServeConfig
from mdlm_wm.world_model import Anchors
from tests.serve.conftest import API_KEY, TEST_CONFIG, free_port, replay, running

SUFFIX = "[location: kitchen | visible: 2]"


# ---------------------------------------------------------------------- answers


def test_health_is_open_and_info_describes_model_and_limits(mdlm_server, mdlm_wm):
  assert httpx.get(f"{mdlm_server.url}/v1/health").json() == {"status": "ok", "model": "mdlm"}
  info = mdlm_server.client().get("/v1/info").json()
  assert info["objective"] == "mdlm" and info["params"] == mdlm_wm.num_params > 0
  assert info["vocab_size"] == mdlm_wm.tokenizer.vocab_size == 512
  assert (info["canvas_len"], info["context_len"]) == (128, 256)
  assert info["sampler_defaults"]["steps"] == mdlm_wm.cfg.sample.steps
  assert info["limits"]["max_num_samples"] == 4 and info["auth"] is True


def test_mdlm_step_returns_num_samples_states_keeping_the_pinned_suffix(mdlm_server, mdlm_wm,
                                                                       step_body, episode):
  body = {**step_body, "num_samples": 3, "seed": 11, "fixed": {"suffix": SUFFIX, "length": 40}}
  with mdlm_server.client() as c:
    first = c.post("/v1/step", json=body)
    again = c.post("/v1/step", json=body)
  assert first.status_code == 200, first.text
  out = first.json()
  assert len(out["next_states"]) == 3 and out["model"] == "mdlm" and out["elapsed_s"] > 0
  assert all(s.endswith(SUFFIX) for s in out["next_states"])
  # Exactly what the library returns for this transition with seed 11.
  s = episode.steps[0]
  tr = Transition(episode.spec, (), s.state, s.action)
  assert out["next_states"] == mdlm_wm.generate(
      [tr], num_samples=3, seed=[11], anchors=[Anchors(suffix=SUFFIX, length=40)])[0]
  assert again.json()["next_states"] == out["next_states"] and out["seed"] == 11


def test_ar_step_returns_num_samples_states(ar_server, step_body):
  with ar_server.client() as c:
    r = c.post("/v1/step", json={**step_body, "num_samples": 3, "history": [["s", "a"]],
                                 "steer": "", "temperature": 0.5})
    info = c.get("/v1/info").json()
  assert r.status_code == 200, r.text
  assert len(r.json()["next_states"]) == 3 and r.json()["model"] == "ar"
  assert info["objective"] == "ar" and "steps" not in info["sampler_defaults"]


def test_rollout_returns_each_samples_states_after_each_action(mdlm_server, mdlm_wm, episode,
                                                               spec_dict):
  actions = [s.action for s in episode.steps[:3]]
  with mdlm_server.client() as c:
    r = c.post("/v1/rollout", json={"spec": spec_dict, "actions": actions, "num_samples": 2,
                                    "seed": 4})
  assert r.status_code == 200, r.text
  trajectories = r.json()["trajectories"]
  assert len(trajectories) == 2 and all(len(t) == 3 for t in trajectories)
  assert trajectories == mdlm_wm.rollout(episode.spec, actions, num_samples=2, seed=4)
  assert r.json()["seed"] == 4


def test_a_seeded_session_is_replayable_from_its_seed(mdlm_server, mdlm_wm, episode, spec_dict):
  actions = [s.action for s in episode.steps[:3]]
  with mdlm_server.client() as c:
    created = c.post("/v1/sessions", json={"spec": spec_dict, "seed": 9})
    assert created.status_code == 201, created.text
    sid = created.json()["session_id"]
    assert created.json()["state"] == episode.spec.initial_state and created.json()["seed"] == 9
    states = []
    for k, action in enumerate(actions):
      r = c.post(f"/v1/sessions/{sid}/step", json={"action": action})
      assert r.status_code == 200, r.text
      assert r.json()["step"] == k + 1
      states.append(r.json()["next_state"])
    kept = c.get(f"/v1/sessions/{sid}").json()
    assert c.delete(f"/v1/sessions/{sid}").json() == {"deleted": sid}
    gone = c.post(f"/v1/sessions/{sid}/step", json={"action": actions[0]})
  assert states == replay(mdlm_wm, episode.spec, episode.spec.initial_state, actions, seed=9)
  assert kept["steps"] == 3 and kept["state"] == states[-1]
  assert [a for _, a in kept["history"]] == actions
  assert kept["history"][0][0] == episode.spec.initial_state
  assert gone.status_code == 404 and "unknown or expired session" in gone.json()["errors"][0]


def test_an_unseeded_session_gets_a_seed_and_steps_through_the_batcher(mdlm_server, mdlm_wm,
                                                                        spec_dict, episode):
  with mdlm_server.client() as c:
    created = c.post("/v1/sessions", json={"spec": spec_dict, "state": "start here"}).json()
    sid = created["session_id"]
    before = mdlm_server.app.state.batcher.stats()["items"]
    r = c.post(f"/v1/sessions/{sid}/step",
               json={"action": episode.steps[0].action, "fixed": {"suffix": SUFFIX}})
    kept = c.get(f"/v1/sessions/{sid}").json()
    c.delete(f"/v1/sessions/{sid}")
  assert r.status_code == 200, r.text
  assert r.json()["next_state"].endswith(SUFFIX)
  assert mdlm_server.app.state.batcher.stats()["items"] == before + 1
  assert kept["history"] == [["start here", episode.steps[0].action]]
  assert [r.json()["next_state"]] == replay(
      mdlm_wm, episode.spec, "start here", [episode.steps[0].action], created["seed"],
      anchors=[Anchors(suffix=SUFFIX)])


# ---------------------------------------------------------------------- bad requests


def bad_requests(spec: dict, step_body: dict) -> list:
  """(path, body or raw bytes, status, text expected in the errors)."""
  deep = {**spec, "tools": [{"name": "x", "parameters": "object"}]}
  return [
      ("/v1/step", b'{"spec": ', 422, "body: invalid JSON"),
      ("/v1/step", b'\xff\xfe', 422, "body: invalid UTF-8 at byte 0"),
      ("/v1/step", b"[]", 422, "body: expected object, got list"),
      ("/v1/step", b"[" * 10_000 + b"]" * 10_000, 422, "body: nested deeper"),
      ("/v1/step", {k: v for k, v in step_body.items() if k != "action"}, 422, "action: missing"),
      ("/v1/step", {**step_body, "spec": "a spec"}, 422, "spec: expected object, got string"),
      ("/v1/step", {**step_body, "spec": deep}, 422,
       "spec.tools[0].parameters: expected object, got string"),
      ("/v1/step", {**step_body, "spec": {**spec, "rules": [1]}}, 422,
       "spec.rules[0]: expected string, got number"),
      ("/v1/step", {**step_body, "spec": {**spec, "tools": [{}]}}, 422,
       "spec.tools[0].name: missing"),
      ("/v1/step", {**step_body, "num_samples": 5}, 422,
       "num_samples: 5 exceeds the limit max_num_samples=4"),
      ("/v1/step", {**step_body, "num_samples": "2"}, 422,
       "num_samples: expected integer, got string"),
      ("/v1/step", {**step_body, "steps": 17}, 422, "steps: 17 exceeds the limit max_steps=16"),
      ("/v1/step", {**step_body, "state": "x" * 1500}, 422,
       "state: 1500 characters exceed the limit max_text_chars=1000"),
      ("/v1/step", {**step_body, "history": [["s", "a"]] * 5}, 422,
       "history: 5 pairs exceed the limit max_history=4"),
      ("/v1/step", {**step_body, "rules": []}, 422, "rules: unknown key"),
      ("/v1/step", {**step_body, "padding": ["x" * 900] * 40}, 413,
       "body: more than 32768 bytes exceeds the limit max_request_bytes=32768"),
      ("/v1/step", {**step_body, "fixed": {"suffix": "x", "length": 10_000}}, 422,
       "length 10000; the canvas holds 127 tokens before its <eot>"),
      ("/v1/step", {**step_body, "fixed": {"spans": [[127, "key"]]}}, 422,
       "fixed: span 'key' at offset 127 does not fit in 127 tokens"),
      ("/v1/step", {**step_body, "fixed": {"spans": [[1]]}}, 422,
       "fixed.spans[0]: expected an [offset, text] pair"),
      ("/v1/rollout", {"spec": spec, "actions": ["a"] * 5}, 422,
       "actions: 5 actions exceed the limit max_actions=4"),
      ("/v1/rollout", {"spec": spec, "actions": [], "seed": 2**40}, 422,
       "seed: must be <= 2147483647"),
      ("/v1/sessions", {"spec": {**spec, "task": None}}, 422,
       "spec.task: expected string, got null"),
      ("/v1/sessions/nope/step", {"action": "look"}, 404, "session_id: unknown or expired"),
  ]


def test_every_bad_request_gets_a_4xx_naming_the_key_path(mdlm_server, spec_dict, step_body):
  cases = bad_requests(spec_dict, step_body)
  served_before = mdlm_server.app.state.batcher.stats()["items"]
  with mdlm_server.client() as c:
    for path, body, status, expected in cases:
      r = (c.post(path, content=body) if isinstance(body, bytes) else c.post(path, json=body))
      assert r.status_code == status, (path, expected, r.text)
      assert any(expected in e for e in r.json()["errors"]), (expected, r.json())
  assert mdlm_server.app.state.batcher.stats()["items"] == served_before  # none reached the model


def test_steps_are_refused_by_an_ar_model(ar_server, step_body):
  with ar_server.client() as c:
    r = c.post("/v1/step", json={**step_body, "steps": 4})
  assert r.status_code == 422
  assert r.json()["errors"] == ["steps: only MDLM models take sampler steps; this model is ar"]


def test_unknown_sessions_are_404_on_every_method(mdlm_server):
  with mdlm_server.client() as c:
    for r in (c.get("/v1/sessions/abc"), c.delete("/v1/sessions/abc"),
              c.post("/v1/sessions/abc/step", json={"action": "x"})):
      assert r.status_code == 404
      assert r.json()["errors"] == ["session_id: unknown or expired session 'abc'"]


def test_the_session_cap_is_a_429_naming_the_limit(mdlm_server, spec_dict):
  with mdlm_server.client() as c:
    ids = [c.post("/v1/sessions", json={"spec": spec_dict}).json()["session_id"]
           for _ in range(TEST_CONFIG.max_sessions)]
    refused = c.post("/v1/sessions", json={"spec": spec_dict})
    for sid in ids:
      c.delete(f"/v1/sessions/{sid}")
  assert refused.status_code == 429
  assert "max_sessions=3" in refused.json()["errors"][0]


def test_idle_sessions_expire(mdlm_wm, spec_dict):
  with running(build_app(mdlm_wm, ServeConfig(session_ttl_s=0.3))) as served:
    with served.client(headers=None) as c:
      sid = c.post("/v1/sessions", json={"spec": spec_dict}).json()["session_id"]
      assert c.get(f"/v1/sessions/{sid}").status_code == 200
      time.sleep(0.5)
      assert c.get(f"/v1/sessions/{sid}").status_code == 404
      assert c.get("/v1/info").json()["sessions"] == 0


@pytest.mark.parametrize("headers, status", [
    (None, 401),
    ({"Authorization": "Bearer wrong"}, 401),
    ({"Authorization": API_KEY}, 401),
    ({"X-API-Key": "wrong"}, 401),
    ({"X-API-Key": API_KEY}, 200),
    ({"Authorization": f"bearer {API_KEY}"}, 200),
])
def test_the_api_key_guards_everything_but_health(mdlm_server, headers, status):
  with mdlm_server.client(headers=headers) as c:
    info = c.get("/v1/info")
    step = c.post("/v1/step", json={"not": "checked before auth"})
    assert c.get("/v1/health").status_code == 200
  assert info.status_code == status
  if status == 401:
    assert step.status_code == 401 and info.headers["www-authenticate"] == "Bearer"
    assert "missing or wrong API key" in info.json()["errors"][0]
  else:
    assert step.status_code == 422  # through auth, then refused for its body


# ---------------------------------------------------------------------- the command line


@pytest.mark.slow  # a fresh process imports JAX and restores the checkpoint: ~30 s here
def test_launch_serve_reads_the_api_key_from_the_environment(tiny_models):
  port = free_port()
  env = {**os.environ, "MDLM_WM_API_KEY": "env-key", "JAX_PLATFORMS": "cpu"}
  proc = subprocess.Popen([sys.executable, "-m", "launch.serve", f"--workdir={tiny_models['ar']}",
                           f"--port={port}", "--max_batch=2", "--model_name=tiny-ar"],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
  url = f"http://127.0.0.1:{port}"
  try:
    deadline = time.monotonic() + 120
    while True:
      assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
      assert time.monotonic() < deadline, "launch.serve did not come up"
      try:
        if httpx.get(f"{url}/v1/health").status_code == 200:
          break
      except httpx.TransportError:
        time.sleep(0.2)
    assert httpx.get(f"{url}/v1/info").status_code == 401
    info = httpx.get(f"{url}/v1/info", headers={"Authorization": "Bearer env-key"}).json()
    assert (info["model"], info["objective"], info["limits"]["max_batch"]) == ("tiny-ar", "ar", 2)
  finally:
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 0
