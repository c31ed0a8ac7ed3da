import json
import subprocess
import sys

import pytest

from mdlm_wm.envs.score import score_prediction
from mdlm_wm.eval import evaluate as ev
from mdlm_wm.train.trainer import train
from tests.conftest import tiny_config


def write_predictions(path, examples, fn):
  with open(path, "w") as f:
    for ex in examples:
      f.write(json.dumps({"id": ex.episode.id, "step": ex.index, "samples": fn(ex)}) + "\n")


def test_round_robin_selection_covers_every_env(tiny_corpus):
  _, examples = ev.load_examples(f"{tiny_corpus}/test.jsonl", 0, max_examples=10)
  assert len(examples) == 10 and len({ex.episode.env for ex in examples}) == 5


def test_reference_predictions_score_perfectly(tiny_corpus, tmp_path):
  episodes, examples = ev.load_examples(f"{tiny_corpus}/test.jsonl", 0)
  path = tmp_path / "p.jsonl"
  write_predictions(path, examples, lambda ex: [ex.step.next_state] * 2)
  report = ev.evaluate(examples, ev.read_predictions(str(path), examples))
  o = report["overall"]
  for key in ("bleu1", "rouge_l", "exact", "checks", "env", "pass", "pass_all", "determined_acc",
              "revealed_valid", "trailing_pass"):
    assert o[key]["mean"] == pytest.approx(1.0), key
    assert o[key]["low"] <= o[key]["mean"] <= o[key]["high"]
  assert o["self_bleu"]["mean"] == pytest.approx(1.0)
  assert set(report["per_env"]) == {"calendar", "files", "household", "lab", "shop"}


def test_wrong_predictions_score_lower(tiny_corpus, tmp_path):
  _, examples = ev.load_examples(f"{tiny_corpus}/test.jsonl", 0)
  path = tmp_path / "p.jsonl"
  # Each transition gets the previous transition's reference: fluent but wrong.
  write_predictions(path, examples, lambda ex: [ex.episode.steps[ex.index - 1].next_state])
  o = ev.evaluate(examples, ev.read_predictions(str(path), examples))["overall"]
  assert o["pass"]["mean"] < 0.5 and o["exact"]["mean"] < 0.5 and o["bleu1"]["mean"] < 0.95


def test_prediction_file_errors_name_the_problem(tiny_corpus, tmp_path):
  _, examples = ev.load_examples(f"{tiny_corpus}/test.jsonl", 0)
  path = tmp_path / "p.jsonl"
  write_predictions(path, examples[1:], lambda ex: ["x"])
  with pytest.raises(ValueError, match=f"no prediction for 1 transition.*{examples[0].key}"):
    ev.read_predictions(str(path), examples)
  path.write_text('{"id": "a"}\n')
  with pytest.raises(ValueError, match=f"{path}:1: expected"):
    ev.read_predictions(str(path), examples)


def test_evaluate_cli_on_a_model_and_on_predictions(tiny_corpus, tmp_path):
  workdir = str(tmp_path / "wm")
  train(tiny_config(tiny_corpus, **{"train.steps": 3}), workdir)
  out = tmp_path / "model.json"
  res = subprocess.run([sys.executable, "-m", "launch.evaluate", f"--workdir={workdir}",
                        f"--data={tiny_corpus}/test.jsonl", f"--out={out}", "--num_samples=2",
                        "--max_examples=10", "--steps=4", "--max_rollouts=2", "--max_steered=2",
                        "--ablate=rules", "--format_retries=2",
                        f"--save_predictions={tmp_path / 'samples.jsonl'}"],
                       capture_output=True, text=True)
  assert res.returncode == 0, res.stderr[-2000:]
  report = json.loads(out.read_text())
  assert report["source"]["objective"] == "mdlm" and report["examples"] == 10
  assert report["source"]["ablated"] == ["rules"] and report["source"]["format_retries"] == 2
  assert set(report["rollout"]["pass_by_horizon"]) <= {"1", "2", "4", "8"}
  # The saved samples score exactly as the model did.
  rescored = subprocess.run([sys.executable, "-m", "launch.evaluate",
                             f"--predictions={tmp_path / 'samples.jsonl'}", "--max_examples=10",
                             f"--data={tiny_corpus}/test.jsonl", f"--out={tmp_path / 'r.json'}"],
                            capture_output=True, text=True)
  assert rescored.returncode == 0, rescored.stderr[-2000:]
  again = json.loads((tmp_path / "r.json").read_text())["overall"]
  for key in ("bleu1", "checks", "pass", "well_formed", "distinct_2"):
    assert again[key]["mean"] == report["overall"][key]["mean"], key
  bad = subprocess.run([sys.executable, "-m", "launch.evaluate", f"--predictions={out}",
                        f"--data={tiny_corpus}/test.jsonl", f"--out={tmp_path / 'x.json'}"],
                       capture_output=True, text=True)
  assert bad.returncode != 0 and "expected" in bad.stderr


def test_evaluate_cli_scores_the_copy_baseline(tiny_corpus, tmp_path):
  out, saved = tmp_path / "copy.json", tmp_path / "copy.samples.jsonl"
  res = subprocess.run([sys.executable, "-m", "launch.evaluate", "--baseline=copy",
                        f"--data={tiny_corpus}/test.jsonl", f"--out={out}", "--max_examples=12",
                        f"--save_predictions={saved}"], capture_output=True, text=True)
  assert res.returncode == 0, res.stderr[-2000:]
  report = json.loads(out.read_text())
  assert report["source"] == {"baseline": "copy", "selected": 12, "skipped": {}}
  assert report["examples"] == 12 and report["num_samples"] == 1
  # The transitions a model evaluation with the same flags scores, each predicted as s_t.
  _, examples = ev.load_examples(f"{tiny_corpus}/test.jsonl", 0, max_examples=12)
  assert ev.read_predictions(str(saved), examples) == [[ex.step.state] for ex in examples]
  rows = [score_prediction(ex.episode.env, ex.episode.spec, ex.step, ex.step.state)
          for ex in examples]
  for key in ("pass", "pass_all", "determined_acc", "revealed_valid"):
    assert report["overall"][key]["mean"] == pytest.approx(
        sum(r[key] for r in rows) / len(rows)), key
  both = subprocess.run([sys.executable, "-m", "launch.evaluate", "--baseline=copy",
                         f"--predictions={saved}", f"--data={tiny_corpus}/test.jsonl",
                         f"--out={tmp_path / 'x.json'}"], capture_output=True, text=True)
  assert both.returncode != 0 and "exactly one of" in both.stderr
  ablated = subprocess.run([sys.executable, "-m", "launch.evaluate", "--baseline=copy",
                            "--ablate=tools", f"--data={tiny_corpus}/test.jsonl",
                            f"--out={tmp_path / 'y.json'}"], capture_output=True, text=True)
  assert ablated.returncode != 0 and "--ablate needs --workdir" in ablated.stderr
