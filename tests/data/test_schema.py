import gzip
import json
import subprocess
import sys
import tracemalloc

import pytest

from mdlm_wm.data import schema
from tests.conftest import episode_dict

from launch.check_data import check_files


def errors_of(path):
  with pytest.raises(schema.SchemaError) as e:
    list(schema.iter_episodes(path))
  return e.value.errors


def test_round_trip_preserves_every_field(write_jsonl):
  path = write_jsonl([episode_dict(0), episode_dict(1, n_steps=3)])
  eps = schema.load_episodes(path)
  assert [len(e.steps) for e in eps] == [2, 3]
  assert eps[0].spec.tools[0].parameters["required"] == ["dir"]
  assert eps[1].steps[-1].done and eps[1].steps[-1].reward == 1.0
  assert eps[0].steps[0].checks.fields == {"location": "room 1"}
  again = schema.episode_from_dict(json.loads(schema.episode_to_json(eps[1])))
  assert again == eps[1]


def test_extra_keys_are_ignored_and_defaults_apply(write_jsonl):
  d = episode_dict()
  d["extra"] = 1
  d["spec"]["unknown"] = "x"
  del d["spec"]["steer"]
  del d["steps"][0]["reward"], d["steps"][0]["done"], d["steps"][0]["checks"]
  ep = schema.load_episodes(write_jsonl([d]))[0]
  assert ep.spec.steer == "" and ep.steps[0].reward == 0.0 and ep.steps[0].done is False
  assert ep.steps[0].checks.is_empty()


def test_gzip_is_read_and_written(tmp_path):
  eps = schema.load_episodes
  path = str(tmp_path / "c.jsonl.gz")
  src = [schema.episode_from_dict(episode_dict(i)) for i in range(3)]
  assert schema.write_episodes(path, src) == 3
  with gzip.open(path, "rt") as f:
    assert len(f.read().splitlines()) == 3
  assert eps(path) == src


def _mutated(fn):
  d = episode_dict()
  fn(d)
  return d


DEFECTS = {
    "missing spec": (lambda d: d.pop("spec"), "spec: missing"),
    "missing task": (lambda d: d["spec"].pop("task"), "spec.task: missing"),
    "missing initial_state": (lambda d: d["spec"].pop("initial_state"),
                              "spec.initial_state: missing"),
    "missing steps": (lambda d: d.pop("steps"), "steps: missing"),
    "missing state": (lambda d: d["steps"][1].pop("state"), "steps[1].state: missing"),
    "missing action": (lambda d: d["steps"][0].pop("action"), "steps[0].action: missing"),
    "missing next_state": (lambda d: d["steps"][1].pop("next_state"),
                           "steps[1].next_state: missing"),
    "tools not a list": (lambda d: d["spec"].update(tools={"name": "x"}),
                         "spec.tools: expected list, got object"),
    "tool without name": (lambda d: d["spec"]["tools"][0].pop("name"),
                          "spec.tools[0].name: missing"),
    "reward not a number": (lambda d: d["steps"][0].update(reward="1"),
                            "steps[0].reward: expected number, got string"),
    "reward is a bool": (lambda d: d["steps"][0].update(reward=True),
                         "steps[0].reward: expected number, got bool"),
    "done not a bool": (lambda d: d["steps"][1].update(done=1),
                        "steps[1].done: expected bool, got number"),
    "empty steps": (lambda d: d.update(steps=[]), "steps: empty"),
    "step not an object": (lambda d: d["steps"].append("hi"),
                           "steps[2]: expected object, got string"),
    "rules not strings": (lambda d: d["spec"].update(rules=["ok", 3]),
                          "spec.rules[1]: expected string, got number"),
    "revealed names nothing": (lambda d: d["steps"][1]["checks"].update(revealed=["key", "door"]),
                               "steps[1].checks.revealed[1]: 'door' names no key of fields"),
}


@pytest.mark.parametrize("name", sorted(DEFECTS))
def test_each_defect_names_file_line_and_key(write_jsonl, name):
  mutate, expected = DEFECTS[name]
  path = write_jsonl([episode_dict(0), _mutated(mutate), episode_dict(2)])
  errors = errors_of(path)
  assert any(e.startswith(f"{path}:2: {expected}") for e in errors), errors
  # The CLI's checker reports the same line.
  _, cli_errors = check_files([path])
  assert cli_errors == errors


@pytest.mark.parametrize("raw, expected", [
    (b'{"id": "x", "spec": {\n', "invalid JSON"),
    (b"[1, 2, 3]\n", "expected a JSON object, got list"),
    (b'"just a string"\n', "expected a JSON object, got string"),
    (b'{"id": "caf\xe9"}\n', "invalid UTF-8"),
])
def test_line_level_defects(write_jsonl, raw, expected):
  path = write_jsonl([episode_dict(0), raw])
  errors = errors_of(path)
  assert len(errors) == 1 and errors[0].startswith(f"{path}:2: ") and expected in errors[0]


def test_truncated_last_line_is_reported(write_jsonl):
  full = json.dumps(episode_dict(1))
  path = write_jsonl([episode_dict(0), full[: len(full) // 2]])
  (error,) = errors_of(path)
  assert error.startswith(f"{path}:2: invalid JSON") and "truncated" in error


def test_empty_file(write_jsonl):
  path = write_jsonl([])
  assert errors_of(path) == [f"{path}: empty file (no episodes)"]
  blank = write_jsonl(["\n", "  \n"], name="blank.jsonl")
  assert errors_of(blank) == [f"{blank}: empty file (no episodes)"]


def test_errors_are_collected_up_to_twenty(write_jsonl):
  bad = _mutated(lambda d: d["spec"].pop("task"))
  path = write_jsonl([bad] * 30)
  with pytest.raises(schema.SchemaError) as e:
    list(schema.iter_episodes(path))
  assert len(e.value.errors) == 20 and e.value.truncated
  assert e.value.errors[19].startswith(f"{path}:20: ")
  few = write_jsonl([bad, episode_dict(), bad], name="few.jsonl")
  assert [e.split(":")[1] for e in errors_of(few)] == ["1", "3"]


def test_several_problems_on_one_line_are_all_listed(write_jsonl):
  d = episode_dict()
  d["spec"].pop("task")
  d["steps"][0]["done"] = "no"
  errors = errors_of(write_jsonl([d]))
  assert len(errors) == 2


def test_streaming_memory_stays_bounded(tmp_path):
  path = tmp_path / "big.jsonl"
  d = episode_dict()
  d["spec"]["initial_state"] = "x" * 20_000
  line = (json.dumps(d) + "\n").encode()
  with open(path, "wb") as f:
    for _ in range(1000):
      f.write(line)
  size = path.stat().st_size
  tracemalloc.start()
  n = sum(1 for _ in schema.iter_episodes(str(path)))
  peak = tracemalloc.get_traced_memory()[1]
  tracemalloc.stop()
  assert n == 1000
  assert peak < size / 10, (peak, size)


def test_check_data_cli_exit_codes(write_jsonl):
  good = write_jsonl([episode_dict(0), episode_dict(1, env="other")], name="good.jsonl")
  bad = write_jsonl([_mutated(lambda d: d["steps"][0].update(done="x"))], name="bad.jsonl")
  run = lambda *files: subprocess.run([sys.executable, "-m", "launch.check_data", *files],
                                      capture_output=True, text=True)
  ok = run(good)
  assert ok.returncode == 0, ok.stderr
  assert "toy" in ok.stdout and "other" in ok.stdout and "OK: 1 file" in ok.stdout
  fail = run(good, bad)
  assert fail.returncode == 1
  assert f"{bad}:1: steps[0].done: expected bool, got string" in fail.stderr
  no_tokenizer = run(good, "--tokenizer=/nonexistent/tokenizer.model")
  assert no_tokenizer.returncode == 2
  assert no_tokenizer.stderr.startswith("error: ") and "/nonexistent/tokenizer.model" in no_tokenizer.stderr
  assert "Traceback" not in no_tokenizer.stderr
  assert run(good, "--config=configs/tiny.py").returncode != 0  # truncation needs a tokenizer


def test_check_data_counts_what_a_config_cuts(write_jsonl, tmp_path):
  from mdlm_wm.data.tokenizer import train_tokenizer
  path = write_jsonl([episode_dict(0), episode_dict(1, n_steps=3)], name="good.jsonl")
  eps = schema.load_episodes(path)
  texts = [e.spec.initial_state for e in eps] + [s.next_state for e in eps for s in e.steps]
  train_tokenizer(texts * 50, 300).save(tmp_path / "tok.model")
  run = lambda length: subprocess.run(
      [sys.executable, "-m", "launch.check_data", path, f"--tokenizer={tmp_path / 'tok.model'}",
       "--config=configs/tiny.py", f"--config.data.max_context_len={length}"],
      capture_output=True, text=True)
  roomy, tight = run(256), run(12)
  assert roomy.returncode == 0 and tight.returncode == 0, tight.stderr
  row = lambda out: next(line.split() for line in out.splitlines() if line.startswith("TOTAL")
                         and len(line.split()) > 10)
  # 5 transitions: all anchors whole with room, none in a 12-token context.
  assert row(roomy.stdout)[1:3] == ["5", "1.000"]
  assert row(tight.stdout)[1:3] == ["5", "0.000"]


def test_the_example_in_docs_schema_md_is_a_valid_episode():
  import os
  import re
  doc = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "schema.md")
  with open(doc, encoding="utf-8") as f:
    example = json.loads(re.search(r"```json\n(.*?)```", f.read(), re.S).group(1))
  ep = schema.episode_from_dict(example)
  assert schema.episode_to_dict(ep) == example  # every key of the example is the format's
  assert [s.checks.revealed for s in ep.steps] == [("open",), (), ("plate", "tomato 1", "visible")]
