import json
import subprocess
import sys

import pytest

from mdlm_wm.eval import compare
from mdlm_wm.eval import evaluate as ev


def wrong(ex):
  """The previous transition's reference: fluent, but the wrong state."""
  return ex.episode.steps[ex.index - 1].next_state


def test_paired_change_from_wrong_to_right_states(tiny_corpus):
  _, examples = ev.load_examples(f"{tiny_corpus}/test.jsonl", 0, max_examples=20)
  # Half the transitions move from wrong to right, the rest stay wrong.
  before = [[wrong(ex)] * 2 for ex in examples]
  after = [[ex.step.next_state] * 2 if i % 2 == 0 else [wrong(ex)] * 2
           for i, ex in enumerate(examples)]
  result = compare.paired_comparison(examples, before, after)
  p = result["pass"]
  assert p["n"] == 20 and p["after"] - p["before"] == pytest.approx(p["diff"])
  assert 0 < p["low"] <= p["diff"] <= p["high"] <= 1
  assert result["bleu1"]["diff"] > 0
  for key in ("pass_all", "determined_acc", "revealed_valid"):
    assert result[key]["n"] == 20 and result[key]["after"] >= result[key]["before"], key
  assert result["pass_all"]["diff"] > 0
  # Diversity is paired too: two distinct samples against two copies of one.
  varied = [[ex.step.next_state, wrong(ex)] for ex in examples]
  diverse = compare.paired_comparison(examples, before, varied)["self_bleu"]
  assert diverse["n"] == 20 and diverse["before"] == 1.0 and diverse["high"] < 0
  single = compare.paired_comparison(examples, [s[:1] for s in before], [s[:1] for s in after])
  assert "self_bleu" not in single and "pass" in single and "distinct_2" in single
  same = compare.paired_comparison(examples, before, before)
  assert all(r["diff"] == r["low"] == r["high"] == 0 for r in same.values())
  with pytest.raises(ValueError, match="20 examples, 19 before"):
    compare.paired_comparison(examples, before[1:], after)


def test_compare_cli_matches_transitions_by_id(tiny_corpus, tmp_path):
  _, examples = ev.load_examples(f"{tiny_corpus}/test.jsonl", 0, max_examples=10)
  before, after = tmp_path / "before.jsonl", tmp_path / "after.jsonl"
  ev.write_predictions(str(before), examples, [[wrong(ex)] for ex in examples])
  # The after file in another order, with an extra transition: only the
  # before file's transitions are compared.
  _, more = ev.load_examples(f"{tiny_corpus}/test.jsonl", 0, max_examples=11)
  ev.write_predictions(str(after), more[::-1], [[ex.step.next_state] for ex in more[::-1]])
  out = tmp_path / "cmp.json"
  res = subprocess.run([sys.executable, "-m", "launch.compare",
                        f"--data={tiny_corpus}/test.jsonl", f"--before={before}",
                        f"--after={after}", f"--out={out}"], capture_output=True, text=True)
  assert res.returncode == 0, res.stderr
  assert "| pass |" in res.stdout
  report = json.loads(out.read_text())
  assert report["transitions"] == 10 and report["metrics"]["pass"]["after"] == 1.0
  after.write_text("")
  res = subprocess.run([sys.executable, "-m", "launch.compare",
                        f"--data={tiny_corpus}/test.jsonl", f"--before={before}",
                        f"--after={after}"], capture_output=True, text=True)
  assert res.returncode != 0 and "no prediction for 10 transition(s)" in res.stderr
