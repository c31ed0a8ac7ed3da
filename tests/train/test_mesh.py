"""Mesh equivalence: 1 device and 8-device (data, fsdp, tensor) meshes train alike.

A subprocess (8 CPU devices need XLA_FLAGS before JAX starts) trains 3 steps
of the tiny config on each mesh and keeps the loop's live state; the tests
compare losses and every parameter and optimizer moment with the 1-device
run, and check how the params and Adam's moments are laid out. The default
run covers 1 device and (2, 2, 2) (data, FSDP and tensor parallel at once);
the pure data-parallel and pure FSDP meshes are slow tests.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

MESHES = {"one": ([1, 1, 1], 1), "mixed": ([2, 2, 2], 8), "data": ([8, 1, 1], 8),
          "fsdp": ([1, 8, 1], 8)}
STEPS = 3
# Only the order of float32 sums differs (reductions over shards vs on one
# device). Measured: losses within 1e-6, params within 1.5e-7, Adam moments
# within 2e-8 (params are ~0.1, the lr 3e-3).
LOSS_ATOL = 1e-5
STATE_ATOL = 2e-6

SCRIPT = r"""
import json, sys
import jax, numpy as np
sys.path.insert(0, ".")
from mdlm_wm.train import trainer
from tests.conftest import tiny_config
corpus, out, meshes, steps = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
live = {}
save = trainer.Checkpointer.save
def keep_state(self, step, state, *args, **kwargs):
  live["state"] = state  # the last save's state is the loop's final one, never donated again
  return save(self, step, state, *args, **kwargs)
trainer.Checkpointer.save = keep_state
report = {}
for name, (shape, n) in meshes.items():
  cfg = tiny_config(corpus, **{"train.steps": steps, "mesh.shape": tuple(shape),
                               "mesh.num_devices": n, "train.eval_batches": 0})
  trainer.train(cfg, f"{out}/{name}")
  flat = {jax.tree_util.keystr(p): x for p, x in jax.tree_util.tree_leaves_with_path(live["state"])}
  np.savez(f"{out}/{name}.npz", **{k: np.asarray(x) for k, x in flat.items()})
  spec = lambda x: [list(e) if isinstance(e, tuple) else e for e in x.sharding.spec]
  report[name] = {k: {"spec": spec(x), "shape": list(x.shape),
                      "shard": list(x.addressable_shards[0].data.shape),
                      "devices": len(x.sharding.device_set)} for k, x in flat.items()}
with open(f"{out}/report.json", "w") as f:
  json.dump(report, f)
"""

EMBED = "['params']['embed']['embedding']"
GATE = "['params']['blocks'][0]['mlp']['gate']['kernel']"
DOWN = "['params']['blocks'][0]['mlp']['down']['kernel']"
QUERY = "['params']['blocks'][0]['attn']['q']['kernel']"
NORM = "['params']['final_norm']['scale']"


def train_on_meshes(corpus: str, out, names: list[str]) -> dict:
  """{mesh name: (losses, state leaves, layout report)} for the meshes `names`."""
  env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
  meshes = json.dumps({n: MESHES[n] for n in names})
  res = subprocess.run([sys.executable, "-c", SCRIPT, corpus, str(out), meshes, str(STEPS)],
                       capture_output=True, text=True, env=env)
  assert res.returncode == 0, res.stderr[-3000:]
  report = json.loads((out / "report.json").read_text())
  result = {}
  for name in names:
    with open(out / name / "metrics.jsonl") as f:
      losses = [json.loads(line)["loss"] for line in f if "loss" in line]
    with np.load(out / f"{name}.npz") as z:
      result[name] = (losses, dict(z), report[name])
  return result


@pytest.fixture(scope="module")
def runs(tiny_corpus, tmp_path_factory):
  return train_on_meshes(tiny_corpus, tmp_path_factory.mktemp("meshes"), ["one", "mixed"])


@pytest.fixture(scope="module")
def more_runs(runs, tiny_corpus, tmp_path_factory):
  """`runs` and the pure data-parallel and FSDP meshes."""
  more = train_on_meshes(tiny_corpus, tmp_path_factory.mktemp("more_meshes"), ["data", "fsdp"])
  return {**runs, **more}


def moments(layout: dict, param: str) -> list[str]:
  """The keys of Adam's mu and nu for `param` (a key of the params tree)."""
  suffix = param.removeprefix("['params']")
  keys = [k for k in layout if k.startswith("['opt_state']") and k.endswith(suffix)
          and (".mu" in k or ".nu" in k)]
  assert len(keys) == 2, keys
  return keys


def assert_same_training(runs: dict, mesh: str) -> None:
  one_losses, one_state, _ = runs["one"]
  losses, state, _ = runs[mesh]
  assert len(losses) == len(one_losses) == STEPS
  np.testing.assert_allclose(losses, one_losses, rtol=0, atol=LOSS_ATOL)
  assert state.keys() == one_state.keys()
  assert sum(k.startswith("['params']") for k in state) == 20  # 2 layers x 9 + embed + norm
  for key, value in one_state.items():
    np.testing.assert_allclose(state[key], value, rtol=0, atol=STATE_ATOL, err_msg=key)
  # The compared state is a trained one: Adam's first moments are not zero.
  assert all(np.abs(one_state[k]).max() > 1e-6 for k in moments(one_state, GATE))


@pytest.mark.slow
def test_mixed_mesh_gives_the_losses_and_state_of_one_device(runs):
  assert_same_training(runs, "mixed")


@pytest.mark.slow
@pytest.mark.parametrize("mesh", ["data", "fsdp"])
def test_data_and_fsdp_meshes_give_the_losses_and_state_of_one_device(more_runs, mesh):
  assert_same_training(more_runs, mesh)


@pytest.mark.slow
def test_fsdp_mesh_shards_embed_over_fsdp(more_runs):
  layout = more_runs["fsdp"][2]
  assert layout[EMBED]["spec"] == ["tensor", "fsdp"] and layout[EMBED]["shard"] == [512, 4]
  assert layout[GATE]["spec"] == ["fsdp", "tensor"] and layout[GATE]["shard"] == [4, 64]
  assert layout[DOWN]["spec"] == ["tensor", "fsdp"] and layout[DOWN]["shard"] == [64, 4]
  assert layout[QUERY]["shard"] == [4, 32]
  assert layout[NORM]["spec"] == [None] and layout[NORM]["shard"] == [32]


def test_mixed_mesh_shards_heads_and_mlp_over_tensor_and_embed_over_fsdp(runs):
  layout = runs["mixed"][2]
  assert layout[GATE]["spec"] == ["fsdp", "tensor"] and layout[GATE]["shard"] == [16, 32]
  assert layout[DOWN]["shard"] == [32, 16]
  assert layout[QUERY]["spec"] == ["fsdp", "tensor"] and layout[QUERY]["shard"] == [16, 16]
  assert layout[EMBED]["shard"] == [256, 16]


@pytest.mark.slow
def test_data_mesh_replicates_params(more_runs):
  layout = more_runs["data"][2]
  for key in (EMBED, GATE, QUERY):
    assert layout[key]["shard"] == layout[key]["shape"] and layout[key]["devices"] == 8


def assert_moments_sharded_like_params(layout: dict) -> None:
  params = [k for k in layout if k.startswith("['params']")]
  for param in params:
    for moment in moments(layout, param):
      assert layout[moment]["spec"] == layout[param]["spec"], (moment, layout[moment])
      assert layout[moment]["shard"] == layout[param]["shard"], moment
  counters = [k for k in layout if k.endswith(".count")]
  assert counters and all(layout[k]["spec"] == [] and layout[k]["devices"] == 8 for k in counters)


def test_adam_moments_are_sharded_like_their_params(runs):
  assert_moments_sharded_like_params(runs["mixed"][2])


@pytest.mark.slow
def test_adam_moments_are_sharded_like_their_params_under_fsdp(more_runs):
  assert_moments_sharded_like_params(more_runs["fsdp"][2])
