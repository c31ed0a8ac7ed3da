"""launch.bench runs end to end on the tiny config and reports every figure."""

import json
import subprocess
import sys

import pytest


@pytest.mark.slow  # ~21 s; the default run must stay under 10 min on 2 cores
def test_bench_runs_and_reports_every_figure(tmp_path):
  out = tmp_path / "bench.json"
  res = subprocess.run([sys.executable, "-m", "launch.bench", "--configs=tiny", "--train_steps=1",
                        "--sampler_steps=2", "--block_sizes=4", "--repeats=1", "--sample_batch=1", "--num_samples=2",
                        f"--out={out}"], capture_output=True, text=True)
  assert res.returncode == 0, res.stderr[-2000:]
  data = json.loads(out.read_text())
  assert data["matmul_peak_flops"] > 1e8
  tiny = data["configs"]["tiny"]
  assert {r["objective"] for r in tiny["train"]} == {"mdlm", "ar"}
  assert all(r["tokens_per_sec"] > 0 and 0 < r["mfu"] < 1 for r in tiny["train"])
  modes = {(r["model"], r["mode"]) for r in tiny["sampler"]}
  assert modes == {("mdlm", "full canvas"), ("mdlm", "full canvas, prefix cache"),
                   ("mdlm", "block kv-cache"), ("ar", "kv-cache")}
  assert all(r["next_states_per_sec"] > 0 for r in tiny["sampler"])
  block = next(r for r in tiny["sampler"] if r["mode"] == "block kv-cache")
  assert block["confidence"] == "top1"  # the tiny config's sample.confidence
  # A step's parts by width: 1 (the AR), b and 2b (a block's first step).
  assert [r["slots"] for r in tiny["step_parts"]] == [1, 4, 8]
  assert all(r[k] > 0 for r in tiny["step_parts"] for k in ("forward_ms", "logits_ms", "draw_ms"))


def test_unknown_config_is_named_before_any_measuring():
  res = subprocess.run([sys.executable, "-m", "launch.bench", "--configs=tiny,no_such_config"],
                       capture_output=True, text=True, timeout=300)
  assert res.returncode == 2, res.stderr[-2000:]
  assert ("error: --configs: no config 'no_such_config' (expected configs/no_such_config.py)"
          in res.stderr)
  assert "matmul peak" not in res.stdout
