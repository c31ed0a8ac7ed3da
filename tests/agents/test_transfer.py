"""The transfer study's report tables, from files shaped like the launchers' outputs."""

import json

import numpy as np

from mdlm_wm.agents import evaluate as evaluate_lib
from mdlm_wm.agents import transfer
from mdlm_wm.train.checkpoint import Checkpointer


def _agent_report(successes_by_env):
  rows = [{"env": env, "seed": i, "success": float(s), "score": float(s), "steps": 4.0,
           "error": None} for env, outcomes in successes_by_env.items()
          for i, s in enumerate(outcomes)]
  return evaluate_lib.report(rows, seconds=30.0)


def test_tables_hold_each_arm_its_budget_and_time_and_list_what_is_missing(tmp_path):
  (tmp_path / "eval").mkdir()
  for arm, wins in {"bc": 1, "grpo_real": 3, "random": 0}.items():
    rep = _agent_report({"a/x": [1] * wins + [0] * (4 - wins), "b/y": [0, 0]})
    (tmp_path / "eval" / f"{arm}.json").write_text(json.dumps(rep))
  (tmp_path / "times.tsv").write_text("bc\t600\ngrpo_real\t90\neval_bc\t120\ngrpo_real\t120\n")
  wm = {"overall": {"pass": {"mean": 0.5, "low": 0.25, "high": 0.75, "n": 8}},
        "per_env": {"a/x": {"pass": {"mean": 1.0, "low": 1.0, "high": 1.0, "n": 4}}}}
  (tmp_path / "eval" / "wm_ar.real_test.json").write_text(json.dumps(wm))
  text = transfer.render(str(tmp_path))
  lines = text.splitlines()
  bc = next(l for l in lines if l.startswith("| (a) behaviour cloning"))
  # success a/x 1 of 4, b/y 0 of 2, overall 1 of 6; BC trains 10 min, evaluates 2 min.
  assert "| 0.25 [" in bc and "| 0.00 [0.00, 0.00] |" in bc and "| 0.17 [" in bc
  assert "| 10.0 min | 6 | 2.0 min |" in bc
  real = next(l for l in lines if l.startswith("| (d)"))
  assert "| 0.75 [" in real and "| 2.0 min |" in real  # the rerun's time replaces the first
  assert "| 0.5 min |" in next(l for l in lines if l.startswith("| random"))
  assert "| AR | all | 0.500 [0.250, 0.750] |" in text
  assert "| AR | a/x | 1.000 [1.000, 1.000] |" in text
  assert "Missing: eval/grpo_ar.json, eval/grpo_mdlm.json, eval/expert.json, " \
         "eval/wm_mdlm.real_test.json, eval/copy.real_test.json" in text
  (tmp_path / "eval" / "copy.real_test.json").write_text(json.dumps(wm))
  assert "| copy s_t (floor) | all | 0.500 [0.250, 0.750] |" in transfer.render(str(tmp_path))


def test_the_long_mdlm_rows_say_how_much_longer_it_trained(tmp_path):
  (tmp_path / "eval").mkdir()
  assert transfer.long_ratio(str(tmp_path)) == "more"  # no checkpoints yet
  for name, step in (("wm_mdlm", 2), ("wm_mdlm_long", 5)):
    ckpt = Checkpointer(str(tmp_path / name / "checkpoints"), save_every=1)
    ckpt.save(step, {"x": np.zeros(1)}, None, {"config": {}}, force=True)
    ckpt.close()
  (tmp_path / "eval" / "grpo_mdlm_long.json").write_text(
      json.dumps(_agent_report({"a/x": [1, 0]})))
  wm = {"overall": {"pass": {"mean": 0.5, "low": 0.25, "high": 0.75, "n": 8}}, "per_env": {}}
  (tmp_path / "eval" / "wm_mdlm_long.real_test.json").write_text(json.dumps(wm))
  text = transfer.render(str(tmp_path))
  assert "| (c') BC + GRPO in the MDLM world model trained 2.5x longer | 0.50 [" in text
  assert "| MDLM, 2.5x steps | all | 0.500 [0.250, 0.750] |" in text
  assert "grpo_mdlm_long" not in text.split("Missing:")[1]  # optional arms are not missing


def test_the_word2world_table_reads_the_wm2real_reports(tmp_path):
  from mdlm_wm.agents import wm2real
  (tmp_path / "eval").mkdir()
  # 4 episodes; 2 won inside the world model, 1 of those also in the real game.
  rows = [{"env": "a/x", "seed": i, "wm_success": w, "real_success": r, "steps": 3.0,
           "actions": [], "error": None}
          for i, (w, r) in enumerate([(1.0, 1.0), (1.0, 0.0), (0.0, 1.0), (0.0, 0.0)])]
  s = lambda mean: {"mean": mean, "low": mean, "high": mean, "n": 5}
  single = {"transitions": 5, "model": {"pass": s(0.4)}, "copy": {"pass": s(0.2)}}
  rep = wm2real.report(rows, single, {"world_model": 50.0, "replay": 10.0})
  (tmp_path / "eval" / "wm2real_wm_mdlm.json").write_text(json.dumps(rep))
  text = transfer.render(str(tmp_path))
  row = next(l for l in text.splitlines() if l.startswith("| MDLM | 0.50 ["))
  assert "| 0.50 [0.00, 1.00] (n 2) | 0.50 [" in row  # WM2Real: 1 of the 2 WM wins
  assert "| 0.400 [0.400, 0.400] | 0.200 [0.200, 0.200] | 4 | 1.0 min |" in row
  assert "eval/wm2real_wm_ar.json" in text.split("Missing:")[1]
  # A world model that grants no win has no WM2Real: a dash, not NaN.
  lost = [dict(r, wm_success=0.0) for r in rows]
  (tmp_path / "eval" / "wm2real_wm_ar.json").write_text(
      json.dumps(wm2real.report(lost, single, {"world_model": 50.0, "replay": 10.0})))
  row = next(l for l in transfer.render(str(tmp_path)).splitlines() if l.startswith("| AR | 0.00 ["))
  assert "| - (n 0) |" in row and "nan" not in row
