"""Request parsing without HTTP: the spec reads as the file validator reads it."""

import pytest

from mdlm_wm.data import schema
from mdlm_wm.serve.config import ServeConfig
from mdlm_wm.serve.protocol import (RequestError, Sampling, decode_body, parse_rollout,
                                    parse_session, parse_session_step, parse_step)
from mdlm_wm.world_model import Anchors
from tests.conftest import episode_dict

CFG = ServeConfig(max_num_samples=4, max_steps=16, max_text_chars=100, max_actions=3,
                  max_history=2)
SPEC = episode_dict()["spec"]


def errors_of(parse, body) -> list[str]:
  with pytest.raises(RequestError) as e:
    parse(body, CFG)
  assert e.value.status == 422
  return e.value.errors


def test_a_full_step_request_parses_to_the_files_spec_and_typed_fields():
  req = parse_step({"spec": SPEC, "history": [["s0", "a0"]], "state": "s1", "action": "a1",
                    "steer": "", "fixed": {"prefix": "You", "suffix": "[ok]", "length": 20,
                                           "spans": [[5, "key"]]},
                    "num_samples": 3, "temperature": 0, "steps": 8, "seed": 7,
                    "env": "household"}, CFG)
  assert req.spec == schema.episode_from_dict(episode_dict()).spec
  assert req.history == (("s0", "a0"),) and (req.state, req.action, req.steer) == ("s1", "a1", "")
  assert req.fixed == Anchors("You", "[ok]", 20, ((5, "key"),))
  assert req.sampling == Sampling(num_samples=3, temperature=0.0, steps=8, seed=7)
  assert req.env == "household"


def test_optional_fields_default_to_the_models_settings():
  req = parse_step({"spec": SPEC, "state": "s", "action": "a"}, CFG)
  assert req.history == () and req.steer is None and req.fixed is None and req.env is None
  assert req.sampling == Sampling(1, None, None, None)


@pytest.mark.parametrize("body, expected", [
    ({"state": "s", "action": "a"}, ["spec: missing"]),
    ({"spec": {**SPEC, "tools": [{"description": 3}]}, "state": "s", "action": "a"},
     ["spec.tools[0].name: missing", "spec.tools[0].description: expected string, got number"]),
    ({"spec": {**SPEC, "rules": ["ok", None]}, "state": "s"},
     ["spec.rules[1]: expected string, got null", "action: missing"]),
    ({"spec": SPEC, "state": "s", "action": "a", "num_sample": 2},
     ["num_sample: unknown key (expected one of: action, env, fixed, history, num_samples, seed, "
      "spec, state, steer, steps, temperature)"]),
    ({"spec": SPEC, "state": "s", "action": "a", "env": "kitchen"},
     ["env: unknown environment 'kitchen' (built-in: calendar, files, household, lab, shop; "
      "real: family/task)"]),
    ({"spec": SPEC, "state": "s", "action": "a", "num_samples": True},
     ["num_samples: expected integer, got bool"]),
    ({"spec": SPEC, "state": "s", "action": "a", "num_samples": 5},
     ["num_samples: 5 exceeds the limit max_num_samples=4"]),
    ({"spec": SPEC, "state": "s", "action": "a", "steps": 0, "seed": -1, "temperature": -1},
     ["temperature: must be a finite number >= 0, got -1", "steps: must be >= 1, got 0",
      "seed: must be >= 0, got -1"]),
    ({"spec": SPEC, "state": "x" * 101, "action": "a"},
     ["state: 101 characters exceed the limit max_text_chars=100"]),
    ({"spec": SPEC, "state": "s", "action": "a", "history": [["s"], "x"]},
     ["history[0]: expected a [state, action] pair of strings, got a list of 1 (string)",
      "history[1]: expected a [state, action] pair of strings, got string"]),
    ({"spec": SPEC, "state": "s", "action": "a", "history": [["s", "a"]] * 3},
     ["history: 3 pairs exceed the limit max_history=2"]),
    ({"spec": SPEC, "state": "s", "action": "a",
      "fixed": {"length": "9", "spans": [["1", "x"]], "sufix": "y"}},
     ["fixed.sufix: unknown key (expected one of: length, prefix, spans, suffix)",
      "fixed.length: expected integer or null, got string",
      "fixed.spans[0]: expected an [offset, text] pair, got a list of 2 (string, string)"]),
])
def test_every_problem_is_reported_with_its_key_path(body, expected):
  assert errors_of(parse_step, body) == expected


def test_a_long_text_deep_in_the_spec_names_its_path():
  spec = {**SPEC, "tools": [{**SPEC["tools"][0], "description": "d" * 200}]}
  assert errors_of(parse_step, {"spec": spec, "state": "s", "action": "a"}) == [
      "spec.tools[0].description: 200 characters exceed the limit max_text_chars=100"]


def test_nesting_is_capped_with_the_path_of_the_deep_value():
  params = {"type": "object"}
  for _ in range(40):
    params = {"p": params}
  spec = {**SPEC, "tools": [{"name": "deep", "parameters": params}]}
  (error,) = errors_of(parse_step, {"spec": spec, "state": "s", "action": "a"})
  assert error == f"spec.tools[0].parameters{'.p' * 28}: nested deeper than 32 levels"


def test_rollout_needs_one_to_max_actions_strings():
  assert parse_rollout({"spec": SPEC, "actions": ["a", "b"]}, CFG).actions == ("a", "b")
  assert parse_rollout({"spec": SPEC, "actions": ["a"], "env": "shop"}, CFG).env == "shop"
  assert errors_of(parse_rollout, {"spec": SPEC, "actions": []}) == [
      "actions: empty (a rollout needs at least one action)"]
  assert errors_of(parse_rollout, {"spec": SPEC, "actions": ["a"] * 4}) == [
      "actions: 4 actions exceed the limit max_actions=3"]
  assert errors_of(parse_rollout, {"spec": SPEC, "actions": ["a", 1]}) == [
      "actions[1]: expected string, got number"]
  assert errors_of(parse_rollout, {"spec": SPEC, "actions": "a"}) == [
      "actions: expected list, got string"]


def test_sessions_take_no_num_samples_and_steps_take_an_action():
  assert parse_session({"spec": SPEC, "seed": 3}, CFG).sampling.seed == 3
  assert parse_session({"spec": SPEC, "env": "lab"}, CFG).env == "lab"
  assert errors_of(parse_session, {"spec": SPEC, "num_samples": 2})[0].startswith(
      "num_samples: unknown key")
  assert parse_session_step({"action": "go"}, CFG).action == "go"
  assert errors_of(parse_session_step, {}) == ["action: missing"]


@pytest.mark.parametrize("raw, expected", [
    (b"{oops", "body: invalid JSON: Expecting property name enclosed in double quotes at line 1 "
               "column 2"),
    (b"[1, 2]", "body: expected object, got list"),
    (b"\xff{}", "body: invalid UTF-8 at byte 0"),
    (b"[" * 100_000 + b"]" * 100_000, "body: nested deeper than the JSON decoder allows (this "
                                      "service takes up to 32 levels)"),
])
def test_a_body_that_is_not_a_json_object_is_refused(raw, expected):
  with pytest.raises(RequestError) as e:
    decode_body(raw)
  assert (e.value.status, e.value.errors) == (422, [expected])
