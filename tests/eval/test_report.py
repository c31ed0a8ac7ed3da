import json
import os
import subprocess
import sys

from mdlm_wm.eval import report as report_lib


def fake_report(objective, params, steps, value):
  s = {"mean": value, "low": value - 0.1, "high": value + 0.1, "n": 10}
  return {"source": {"objective": objective, "params": params, "seconds_per_transition": steps / 100,
                     "sample": {"steps": steps}},
          "overall": {k: s for k in ("bleu1", "rouge_l", "exact", "checks", "env", "pass",
                                     "pass_all", "determined_acc", "revealed_valid",
                                     "trailing_pass", "self_bleu", "distinct_2")},
          "per_env": {"shop": {"pass": s}}, "mauve": {"shop": 0.5, "lab": None},
          "rollout": {"pass_by_horizon": {"1": value, "2": value / 2},
                      "score_by_horizon": {"1": value, "2": value / 2}}}


def test_report_cli_writes_table_and_plots(tmp_path):
  paths = []
  for i, (obj, params, steps, v) in enumerate([("mdlm", 1e6, 8, 0.3), ("mdlm", 1e6, 32, 0.5),
                                               ("ar", 4e6, 0, 0.4)]):
    p = tmp_path / f"r{i}.json"
    p.write_text(json.dumps(fake_report(obj, params, steps, v)))
    paths.append(str(p))
  out = tmp_path / "out"
  res = subprocess.run([sys.executable, "-m", "launch.report", f"--reports={','.join(paths)}",
                        "--names=m8,m32,ar4x", f"--out={out}"], capture_output=True, text=True)
  assert res.returncode == 0, res.stderr[-2000:]
  md = (out / "results.md").read_text()
  assert "| pass | 0.300 [0.200, 0.400] | 0.500 [0.400, 0.600] | 0.400 [0.300, 0.500] |" in md
  for key in ("pass_all", "determined_acc", "revealed_valid"):
    assert f"| {key} | 0.300 [0.200, 0.400] |" in md, key
  assert "| MAUVE: shop | 0.500 |" in md and "| MAUVE: lab | - |" in md
  assert "| rollout score @ 2 steps | 0.150 | 0.250 | 0.200 |" in md
  assert "| s / transition (G samples, incl. compile) | 0.080 | 0.320 | 0.000 |" in md
  for png in ("pass_by_size.png", "pass_by_horizon.png", "quality_latency_vs_steps.png"):
    assert os.path.getsize(out / png) > 1000 and f"]({png})" in md


def test_baseline_reports_are_labelled_as_baselines():
  s = {"mean": 0.2, "low": 0.1, "high": 0.3, "n": 5}
  copy = {"source": {"baseline": "copy", "selected": 5, "skipped": {}},
          "overall": {"pass": s, "pass_all": s}, "per_env": {"shop": {"pass": s}}}
  model = fake_report("ar", 4e6, 0, 0.4)
  md = report_lib.markdown_table([copy, model], ["floor", "ar4x"])
  assert md.splitlines()[0] == "| metric | floor (baseline: copy) | ar4x (ar, 4.00M) |"
  assert "| pass | 0.200 [0.100, 0.300] | 0.400 [0.300, 0.500] |" in md
  assert "| determined_acc | - | 0.400 [0.300, 0.500] |" in md
