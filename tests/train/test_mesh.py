"""The same training steps on 1 CPU device and on an 8-device (2, 2, 2) mesh."""

import json
import os
import subprocess
import sys

import pytest

SCRIPT = r"""
import json, sys
sys.path.insert(0, ".")
from mdlm_wm.train.trainer import train
from tests.conftest import tiny_config
corpus, workdir, shape, n = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
cfg = tiny_config(corpus, **{"train.steps": 3, "mesh.shape": tuple(shape), "mesh.num_devices": n,
                              "train.eval_batches": 0})
train(cfg, workdir)
"""


def run(corpus, workdir, shape, n):
  env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
  res = subprocess.run([sys.executable, "-c", SCRIPT, corpus, str(workdir), json.dumps(shape),
                        str(n)], capture_output=True, text=True, env=env)
  assert res.returncode == 0, res.stderr[-3000:]
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    return [json.loads(line)["loss"] for line in f if "loss" in line]


def test_one_device_and_eight_devices_give_the_same_loss(tiny_corpus, tmp_path):
  one = run(tiny_corpus, tmp_path / "one", [1, 1, 1], 1)
  eight = run(tiny_corpus, tmp_path / "eight", [2, 2, 2], 8)
  assert len(one) == len(eight) == 3
  for a, b in zip(one, eight):
    assert b == pytest.approx(a, abs=1e-5)
