import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from mdlm_wm.train import trainer
from mdlm_wm.train.trainer import train
from tests.conftest import read_metrics, tiny_config


def train_command(cfg, overrides, workdir):
  """`launch.train` on configs/tiny.py with cfg's data paths and `overrides`."""
  flags = [f"--config.{k}={v}" for k, v in {
      "data.train": cfg.data.train, "data.valid": cfg.data.valid,
      "data.tokenizer": cfg.data.tokenizer, **overrides}.items()]
  return [sys.executable, "-m", "launch.train", "--config=configs/tiny.py",
          f"--workdir={workdir}", *flags]


def losses(workdir):
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    rows = [json.loads(line) for line in f]
  return {r["step"]: r["loss"] for r in rows if "loss" in r}


@pytest.mark.parametrize("objective", ["mdlm", "ar"])
def test_loss_falls_and_metrics_are_written(tiny_corpus, tmp_path, objective):
  cfg = tiny_config(tiny_corpus, objective=objective, **{"train.steps": 30, "optim.lr": 1e-2})
  result = train(cfg, str(tmp_path))
  got = losses(tmp_path)
  assert sorted(got) == list(range(1, 31))
  first, last = np.mean([got[s] for s in (1, 2, 3)]), np.mean([got[s] for s in (28, 29, 30)])
  # Real tokens only (no <eot> fill, which made the first steps easy): a drop of a
  # fifth in 30 steps of a tiny model.
  assert last < 0.8 * first, (first, last)
  assert result.valid_loss is not None and np.isfinite(result.valid_loss)
  rows = read_metrics(tmp_path)
  assert {"step", "loss", "tokens_per_sec", "learning_rate"} <= set(rows[0])
  if objective == "mdlm":  # the clean copy's next-token loss (diffusion.clean_ar_weight)
    clean = [r["clean_ar"] for r in rows if "clean_ar" in r]
    assert len(clean) == 30 and np.mean(clean[-3:]) < 0.8 * np.mean(clean[:3])
    valid = [r for r in rows if "valid_loss" in r]
    assert valid and all(np.isfinite(r["valid_clean_ar"]) for r in valid)
  assert result.steps_run == 30 and result.summary().startswith("done: step 30, loss ")
  again = train(cfg, str(tmp_path))  # a finished workdir: nothing to run, and it says so
  assert (again.step, again.steps_run) == (30, 0)
  assert again.summary().startswith("nothing to train: the workdir is already at step 30")


def test_a_run_stopped_and_resumed_gives_the_same_losses(tiny_corpus, tmp_path):
  # In-process twin of the kill -9 test below (slow: it launches two runs).
  cfg = tiny_config(tiny_corpus, **{"train.steps": 12, "train.checkpoint_every": 4})
  train(cfg, str(tmp_path / "ref"))
  stopped = train(cfg, str(tmp_path / "resumed"), max_steps=6)
  assert stopped.step == 6  # a stop between checkpoints saves its step
  resumed = train(cfg, str(tmp_path / "resumed"))
  assert (resumed.step, resumed.steps_run) == (12, 6)
  a, b = losses(tmp_path / "ref"), losses(tmp_path / "resumed")
  assert sorted(b) == list(range(1, 13))
  for step in range(7, 13):
    assert b[step] == pytest.approx(a[step], abs=1e-6), step


@pytest.mark.slow
def test_kill_9_and_restart_gives_the_same_losses(tiny_corpus, tmp_path):
  overrides = {"train.steps": 40, "train.checkpoint_every": 4}
  cfg = tiny_config(tiny_corpus, **overrides)
  ref = str(tmp_path / "ref")
  train(cfg, ref)
  workdir = str(tmp_path / "killed")
  cmd = train_command(cfg, overrides, workdir)
  proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  ckpt = os.path.join(workdir, "checkpoints", "8")
  deadline = time.time() + 240
  while not os.path.isdir(ckpt) and proc.poll() is None and time.time() < deadline:
    time.sleep(0.05)
  proc.send_signal(signal.SIGKILL)
  proc.wait()
  assert os.path.isdir(ckpt), "the run never reached its step-8 checkpoint"
  assert proc.returncode == -signal.SIGKILL, "the run ended before it was killed"
  saved = [int(d) for d in os.listdir(os.path.join(workdir, "checkpoints")) if d.isdigit()]
  assert max(saved) < 40
  done = subprocess.run(cmd, capture_output=True, text=True)
  assert done.returncode == 0, done.stderr[-2000:]
  assert "resumed from step" in done.stdout
  # Quiet by default: the launcher's progress, none of orbax's INFO lines per checkpoint.
  assert "step 40/40" in done.stderr and "orbax" not in done.stderr, done.stderr[-2000:]
  a, b = losses(ref), losses(workdir)
  assert sorted(b) == list(range(1, 41))
  for step in range(max(saved) + 1, 41):
    assert b[step] == pytest.approx(a[step], abs=1e-6), step


def test_sigterm_saves_a_checkpoint_and_the_next_launch_resumes(tiny_corpus, tmp_path):
  overrides = {"train.steps": 60, "train.checkpoint_every": 50}
  cfg = tiny_config(tiny_corpus, **overrides)
  workdir = str(tmp_path / "preempted")
  cmd = train_command(cfg, overrides, workdir)
  proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
  metrics = os.path.join(workdir, "metrics.jsonl")
  deadline = time.time() + 240
  while proc.poll() is None and time.time() < deadline:
    if os.path.exists(metrics) and len(open(metrics).readlines()) >= 3:
      break
    time.sleep(0.05)
  proc.send_signal(signal.SIGTERM)
  out, _ = proc.communicate(timeout=120)
  assert proc.returncode == 0 and "SIGTERM: saved a checkpoint at step" in out
  saved = [int(d) for d in os.listdir(os.path.join(workdir, "checkpoints")) if d.isdigit()]
  assert saved and max(saved) < 50, saved  # saved on the signal, not on the interval
  # The next launch (in-process here; the kill -9 test relaunches the CLI) resumes there.
  done = train(cfg, workdir)
  assert (done.step, done.steps_run) == (60, 60 - max(saved))
  assert sorted(losses(workdir)) == list(range(1, 61))


def test_a_crash_during_an_evaluation_keeps_the_step_and_the_rerun_evaluates_it(
    tiny_corpus, tmp_path, monkeypatch):
  cfg = tiny_config(tiny_corpus, **{"train.steps": 4, "train.eval_every": 2,
                                    "train.checkpoint_every": 100})

  def broken_eval_step(graphdef, obj_cfg):
    def fn(params, batch, rng):
      raise RuntimeError("out of memory in the evaluation")
    return fn

  with monkeypatch.context() as m:
    m.setattr(trainer, "make_eval_step", broken_eval_step)
    with pytest.raises(RuntimeError, match="out of memory"):
      train(cfg, str(tmp_path))
  assert max(int(d) for d in os.listdir(tmp_path / "checkpoints") if d.isdigit()) == 2
  assert sorted(losses(tmp_path)) == [1, 2]
  result = train(cfg, str(tmp_path))
  valid = [r["step"] for r in read_metrics(tmp_path) if "valid_loss" in r]
  assert valid == [2, 4] and result.steps_run == 2
  assert sorted(losses(tmp_path)) == [1, 2, 3, 4]


def test_nonfinite_loss_stops_with_the_last_good_checkpoint(tiny_corpus, tmp_path):
  cfg = tiny_config(tiny_corpus, **{"train.steps": 20, "train.checkpoint_every": 1,
                                    "optim.lr": 1e30, "optim.clip_norm": 0.0,
                                    "optim.warmup_steps": 0})
  with pytest.raises(FloatingPointError, match="non-finite loss") as e:
    train(cfg, str(tmp_path))
  ckpts = [int(d) for d in os.listdir(tmp_path / "checkpoints") if d.isdigit()]
  assert ckpts and f"last checkpoint is step {max(ckpts)}" in str(e.value)
  assert all(np.isfinite(v) for v in losses(tmp_path).values())


def test_skip_policy_continues(tiny_corpus, tmp_path):
  cfg = tiny_config(tiny_corpus, **{"train.steps": 6, "optim.lr": 1e30, "optim.clip_norm": 0.0,
                                    "optim.warmup_steps": 0, "train.nan_policy": "skip"})
  result = train(cfg, str(tmp_path))
  assert result.step == 6
  rows = [json.loads(line) for line in open(tmp_path / "metrics.jsonl")]
  assert any(r.get("skipped") for r in rows)


def test_bad_config_names_the_key(tiny_corpus, tmp_path):
  with pytest.raises(ValueError, match="config.data.seq_len"):
    train(tiny_config(tiny_corpus, **{"data.seq_len": 64}), str(tmp_path))
  with pytest.raises(ValueError, match="config.model.attention: the AR objective"):
    train(tiny_config(tiny_corpus, objective="ar", **{"model.attention": "bidirectional"}),
          str(tmp_path))
