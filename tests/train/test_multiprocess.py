"""Multi-process training: settings, data layouts across process counts, launchers,
and (slow) real 2-process runs on localhost."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from mdlm_wm import config as config_lib
from mdlm_wm.data import pipeline
from mdlm_wm.data.tokenizer import Tokenizer
from mdlm_wm.train import distributed, trainer
from tests.conftest import tiny_config

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPTS = ["launch/multiprocess_demo.sh", "launch/tpu/run_pod.sh", "launch/slurm/train.sbatch"]


# ------------------------------------------------------------------ settings

def test_no_settings_is_a_single_process_run():
  settings = distributed.resolve(environ={})
  assert not settings.enabled
  assert distributed.initialize(settings) is False


def test_environment_recipe_and_flags_override_it():
  env = {"COORDINATOR_ADDRESS": "10.0.0.1:1234", "NUM_PROCESSES": "4", "PROCESS_ID": "3"}
  assert distributed.resolve(environ=env) == distributed.Settings("10.0.0.1:1234", 4, 3)
  flagged = distributed.resolve("host:99", 8, 0, environ=env)
  assert flagged == distributed.Settings("host:99", 8, 0) and flagged.enabled


def test_incomplete_or_bad_settings_name_the_problem():
  with pytest.raises(ValueError, match="process_id not set"):
    distributed.resolve("host:1", 2, environ={})
  with pytest.raises(ValueError, match=r"process_id must be in \[0, 2\), got 2"):
    distributed.resolve("host:1", 2, 2, environ={})
  with pytest.raises(ValueError, match="NUM_PROCESSES='two' is not an integer"):
    distributed.resolve(environ={"NUM_PROCESSES": "two"})
  # With auto-detection jax fills in what is missing (SLURM, Cloud TPU).
  assert distributed.resolve(num_processes=2, auto=True, environ={}).enabled


def test_initialize_passes_the_settings_to_jax(monkeypatch):
  calls = []
  monkeypatch.setattr(distributed.jax.distributed, "initialize",
                      lambda **kwargs: calls.append(kwargs))
  assert distributed.initialize(distributed.Settings("host:1", 2, 1), timeout_s=7)
  assert calls == [{"coordinator_address": "host:1", "num_processes": 2, "process_id": 1,
                    "initialization_timeout": 7}]
  calls.clear()
  assert distributed.initialize(distributed.Settings(auto=True))
  assert calls[0]["coordinator_address"] is None and calls[0]["num_processes"] is None


def test_launch_train_rejects_incomplete_settings(tmp_path):
  res = subprocess.run([sys.executable, "-m", "launch.train", "--config=configs/tiny.py",
                        f"--workdir={tmp_path}", "--num_processes=2"],
                       capture_output=True, text=True, cwd=REPO,
                       env={k: v for k, v in os.environ.items()
                            if k not in distributed.ENV_VARS})
  assert res.returncode != 0
  assert "coordinator_address, process_id not set" in res.stderr


# ------------------------------------------------------------------ data shards

def test_data_shards_default_to_the_checkpoint_and_must_fit_the_processes():
  assert trainer._data_shards(0, None, 2) == 2
  assert trainer._data_shards(0, {"data_shards": 4}, 2) == 4
  assert trainer._data_shards(0, {}, 1) == 1  # a checkpoint from before data shards
  with pytest.raises(ValueError, match="read in 4 shards, not 2"):
    trainer._data_shards(2, {"data_shards": 4}, 2)
  with pytest.raises(ValueError, match=r"data_shards \(3\) must be a multiple"):
    trainer._data_shards(3, None, 2)


def shard_datasets(corpus, shard_ids, shard_count=2):
  cfg = tiny_config(corpus)
  ds, rows = pipeline.make_sharded_dataset(
      config_lib.split_paths(cfg.data.train), Tokenizer.load(cfg.data.tokenizer),
      trainer.pipeline_config(cfg, batch_size=cfg.data.batch_size // shard_count),
      shard_ids=shard_ids, shard_count=shard_count)
  assert len(rows) == len(shard_ids)
  return iter(ds)


def assert_same_batch(a, b):
  assert a.keys() == b.keys()
  for k in a:
    np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_one_process_reading_two_shards_sees_the_two_processes_rows(tiny_corpus):
  both = shard_datasets(tiny_corpus, [0, 1])
  p0, p1 = shard_datasets(tiny_corpus, [0]), shard_datasets(tiny_corpus, [1])
  for _ in range(2):
    a, b = next(p0), next(p1)
    assert a["tokens"].shape == (4, tiny_config(tiny_corpus).data.seq_len)
    assert_same_batch(next(both), pipeline._concat([a, b]))
  # A 2-process checkpoint resumed by one process, and back.
  one = shard_datasets(tiny_corpus, [0, 1])
  one.set_state(pipeline.relayout_state([p0.get_state(), p1.get_state()], 2, [0, 1]))
  a, b = next(p0), next(p1)
  assert_same_batch(next(one), pipeline._concat([a, b]))
  second = shard_datasets(tiny_corpus, [1])
  second.set_state(pipeline.relayout_state([one.get_state()], 2, [1]))
  assert_same_batch(next(second), next(p1))


def test_relayout_rejects_a_shard_count_the_states_cannot_hold():
  with pytest.raises(ValueError, match="3 saved data states cannot hold 4 shards"):
    pipeline.relayout_state([{}, {}, {}], 4, [0])


# ------------------------------------------------------------------ launchers

@pytest.mark.parametrize("script", SCRIPTS)
def test_launchers_parse(script):
  subprocess.run(["bash", "-n", script], check=True, cwd=REPO)


def run_script(args, env=None):
  return subprocess.run(["bash", *args], capture_output=True, text=True, cwd=REPO,
                        env={**os.environ, **(env or {})})


def test_run_pod_mounts_the_bucket_and_runs_on_every_worker():
  res = run_script(["launch/tpu/run_pod.sh", "--tpu=pod", "--zone=us-central2-b",
                    "--workdir=gs://bucket/runs/a", "--project=proj", "--dry_run", "--",
                    "--config.data.train=/tmp/gcs/bucket/c/train.jsonl"])
  assert res.returncode == 0, res.stderr
  line = res.stdout.strip()
  assert line.startswith("gcloud compute tpus tpu-vm ssh pod --zone=us-central2-b --worker=all")
  assert "--project=proj" in line
  assert "gcsfuse --implicit-dirs --rename-dir-limit=200000 bucket /tmp/gcs/bucket" in line
  assert ("python3 -m launch.train --config=configs/base_1b.py "
          "--workdir=/tmp/gcs/bucket/runs/a --distributed "
          "--config.data.train=/tmp/gcs/bucket/c/train.jsonl") in line


def test_run_pod_takes_its_settings_from_the_environment_and_rejects_missing_ones():
  env = {"TPU_NAME": "t", "ZONE": "z", "WORKDIR": "/nfs/run", "CONFIG": "configs/small.py"}
  res = run_script(["launch/tpu/run_pod.sh", "--dry_run"], env)
  assert res.returncode == 0, res.stderr
  assert "ssh t --zone=z --worker=all" in res.stdout and "gcsfuse" not in res.stdout
  assert "--config=configs/small.py --workdir=/nfs/run --distributed" in res.stdout
  res = run_script(["launch/tpu/run_pod.sh", "--zone=z", "--workdir=/x"], {"TPU_NAME": ""})
  assert res.returncode == 2 and "missing --tpu" in res.stderr
  res = run_script(["launch/tpu/run_pod.sh", "--tpu=t", "--zone=z", "--workdir=/x", "--oops"])
  assert res.returncode == 2 and "unknown argument: --oops" in res.stderr


def test_sbatch_runs_one_srun_with_jax_detecting_slurm():
  env = {"DRY_RUN": "1", "CONFIG": "configs/base_1b.py", "WORKDIR": "/shared/w",
         "EXTRA_FLAGS": "--config.data.train=/s/train.jsonl --max_steps=10"}
  res = run_script(["launch/slurm/train.sbatch"], env)
  assert res.returncode == 0, res.stderr
  assert ("srun --kill-on-bad-exit=1 python -m launch.train --config=configs/base_1b.py "
          "--workdir=/shared/w --distributed --config.data.train=/s/train.jsonl "
          "--max_steps=10") in res.stdout
  assert "JAX_LOCAL_DEVICE_IDS=\n" in res.stdout  # one GPU per process: jax picks it
  res = run_script(["launch/slurm/train.sbatch"],
                   {**env, "PROCESS_PER": "node", "SLURM_GPUS_ON_NODE": "4"})
  assert "JAX_LOCAL_DEVICE_IDS=0,1,2,3" in res.stdout
  res = run_script(["launch/slurm/train.sbatch"], {"CONFIG": "", "WORKDIR": ""})
  assert res.returncode == 2 and "set CONFIG and WORKDIR" in res.stderr
  res = run_script(["launch/slurm/train.sbatch"], {**env, "PROCESS_PER": "socket"})
  assert res.returncode == 2 and "PROCESS_PER must be gpu or node" in res.stderr


def test_demo_dry_run_prints_the_three_runs():
  res = run_script(["launch/multiprocess_demo.sh", "--dry_run", "--port=4321",
                    "--workdir=/tmp/demo", "--steps=8"])
  assert res.returncode == 0, res.stderr
  lines = res.stdout.splitlines()
  train = [l for l in lines if "-m launch.train" in l]
  assert len(train) == 4
  assert all("--data_shards=2" in l and "--config.train.steps=8" in l for l in train)
  for pid in (0, 1):
    assert any(f"NUM_PROCESSES=2 PROCESS_ID={pid}" in l and "JAX_NUM_CPU_DEVICES=4" in l
               and "COORDINATOR_ADDRESS=localhost:4321" in l and "--max_steps=4" in l
               for l in train)
  assert "--workdir=/tmp/demo/resumed" in train[-1] and "device_count=8" in train[-1]
  res = run_script(["launch/multiprocess_demo.sh", "--steps=1"])
  assert res.returncode == 2 and "--steps must be an integer >= 2" in res.stderr


# ------------------------------------------------------------------ real processes

def losses(workdir) -> dict[int, float]:
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    return {r["step"]: r["loss"] for r in map(json.loads, f) if "loss" in r}


@pytest.mark.slow
def test_two_processes_train_like_one_and_one_process_resumes_them(tiny_corpus, tmp_path):
  res = run_script(["launch/multiprocess_demo.sh", f"--workdir={tmp_path}",
                    f"--corpus={tiny_corpus}", "--steps=6"])
  print(res.stdout)
  assert res.returncode == 0, res.stderr + "".join(
      open(tmp_path / "logs" / f).read()[-2000:] for f in os.listdir(tmp_path / "logs"))
  assert "process 0/2: 4 local of 8 cpu devices" in res.stdout
  assert "process 1/2: 4 local of 8 cpu devices" in res.stdout
  assert "resumed from step 3" in res.stdout
  ref, two, resumed = (losses(tmp_path / r) for r in ("reference", "2proc", "resumed"))
  assert sorted(ref) == sorted(resumed) == [1, 2, 3, 4, 5, 6] and sorted(two) == [1, 2, 3]
  for step in range(1, 7):
    other = two[step] if step <= 3 else resumed[step]
    assert other == pytest.approx(ref[step], abs=1e-5), step
  data = tmp_path / "2proc" / "checkpoints" / "3" / "data"
  assert sorted(os.listdir(data)) == ["commit_success.txt", "process_0-of-2.json",
                                      "process_1-of-2.json"]


def free_port() -> int:
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]


@pytest.mark.slow
def test_sigterm_to_one_process_saves_every_process_at_the_same_step(tiny_corpus, tmp_path):
  cfg = tiny_config(tiny_corpus)
  workdir = tmp_path / "run"
  flags = [f"--config.data.{k}={cfg.data[k]}" for k in ("train", "valid", "tokenizer")]
  port = free_port()
  procs = []
  for pid in (0, 1):
    env = {**os.environ, "JAX_NUM_CPU_DEVICES": "4", "COORDINATOR_ADDRESS": f"localhost:{port}",
           "NUM_PROCESSES": "2", "PROCESS_ID": str(pid)}
    procs.append(subprocess.Popen(
        [sys.executable, "-m", "launch.train", "--config=configs/tiny.py", f"--workdir={workdir}",
         "--config.train.steps=500", "--config.train.checkpoint_every=400",
         "--config.train.eval_batches=0", *flags],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
  metrics = workdir / "metrics.jsonl"
  deadline = time.time() + 400
  while time.time() < deadline and all(p.poll() is None for p in procs):
    if metrics.exists() and len(metrics.read_text().splitlines()) >= 3:
      break
    time.sleep(0.1)
  procs[1].send_signal(signal.SIGTERM)  # only process 1 is told
  outs = [p.communicate(timeout=300)[0] for p in procs]
  assert [p.returncode for p in procs] == [0, 0], outs
  steps = [int(m.group(1)) for out in outs
           for m in [re.search(r"SIGTERM: saved a checkpoint at step (\d+)", out)] if m]
  assert len(steps) == 2 and steps[0] == steps[1] < 400, outs
  saved = workdir / "checkpoints" / str(steps[0])
  assert (saved / "data" / "process_0-of-2.json").exists()
  assert (saved / "data" / "process_1-of-2.json").exists()
  assert sorted(losses(workdir)) == list(range(1, steps[0] + 1))
