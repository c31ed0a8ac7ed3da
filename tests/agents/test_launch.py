"""The three agent command lines end to end (slow: three processes that import jax)."""

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(*args):
  proc = subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True,
                        timeout=1800, check=False)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  return proc.stdout


@pytest.mark.slow
def test_train_evaluate_and_grpo_from_the_command_line(tiny_corpus, tiny_models, tmp_path):
  agent, out, grpo_dir = str(tmp_path / "agent"), str(tmp_path / "eval.json"), str(tmp_path / "g")
  tiny = ["--config.model.d_model=32", "--config.model.d_ff=64", "--config.train.steps=4",
          "--config.optim.warmup_steps=1",
          "--config.train.eval_every=2", "--config.train.eval_batches=1",
          "--config.train.tensorboard=False", "--config.data.max_target_len=64",
          "--config.data.seq_len=384"]
  _run("launch.train_agent", "--config=configs/agent_bc.py", f"--data={tiny_corpus}",
       f"--workdir={agent}", *tiny)
  stdout = _run("launch.evaluate_agent", f"--agent={agent}", "--env=files", "--episodes=2",
                "--max_steps=3", f"--out={out}")
  with open(out) as f:
    report = json.load(f)
  assert report["overall"]["steps"]["n"] == 2 and "overall: success" in stdout
  _run("launch.agent_grpo", "--config=configs/agent_grpo.py", f"--agent={agent}",
       f"--world_model={tiny_models['ar']}", "--env=files", f"--workdir={grpo_dir}",
       "--config.grpo.num_tasks=1", "--config.grpo.num_episodes=2", "--config.grpo.horizon=2",
       "--config.train.steps=1", "--config.optim.warmup_steps=0",
       "--config.train.eval_episodes=0",
       "--config.train.tensorboard=False", "--config.world_model_sample.steps=4")
  with open(os.path.join(grpo_dir, "metrics.jsonl")) as f:
    assert [json.loads(line)["step"] for line in f] == [1]
