"""The train state and the workdir's file names, without the training loop.

What loading a checkpoint needs (`WorldModel.load`, GRPO, weight import)
and what the loop needs to start: the model with sharded params, the
optimizer, its state sharded like the params, and where a workdir keeps its
checkpoints and tokenizer. Nothing here reads data, so inference never
imports grain or the pipeline.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec as P

from mdlm_wm.model.transformer import ModelConfig, Transformer

TOKENIZER_FILE = "tokenizer.model"
CHECKPOINT_DIR = "checkpoints"


def make_optimizer(cfg) -> tuple[optax.GradientTransformation, Callable]:
  """AdamW with linear warmup then cosine decay to min_lr_ratio * lr."""
  o, steps = cfg.optim, cfg.train.steps
  lr = optax.warmup_cosine_decay_schedule(
      init_value=0.0, peak_value=o.lr, warmup_steps=o.warmup_steps,
      decay_steps=steps, end_value=o.lr * o.min_lr_ratio)
  parts = [optax.clip_by_global_norm(o.clip_norm)] if o.clip_norm > 0 else []
  parts.append(optax.adamw(lr, b1=o.b1, b2=o.b2, weight_decay=o.weight_decay))
  return optax.chain(*parts), lr


def create_model(model_cfg: ModelConfig, mesh, rules, seed: int):
  """Builds the model with its params sharded on `mesh`; returns (graphdef, params)."""
  with jax.set_mesh(mesh):
    model = Transformer(model_cfg, rngs=nnx.Rngs(seed), rules=rules)
  graphdef, state = nnx.split(model)
  # Plain nested dicts of arrays: what optax and orbax handle best.
  return graphdef, nnx.to_pure_dict(state)


def init_train_state(params, tx):
  """Params, optimizer state (each moment sharded like its param) and step."""
  opt_state = jax.jit(tx.init, out_shardings=_opt_state_shardings(params, tx))(params)
  return {"params": params, "opt_state": opt_state, "step": jnp.zeros((), jnp.int32)}


def _opt_state_shardings(params, tx):
  """Adam's mu and nu like their params, counters replicated; None (jit's
  choice) for params that are tracers (an eval_shape of the state) or not on a mesh.

  Left to GSPMD, `tx.init`'s zeros depend on no input and come out replicated:
  under FSDP every device would hold the full optimizer state.
  """
  leaves = jax.tree.leaves(params)
  if any(isinstance(x, jax.core.Tracer) or not isinstance(x.sharding, NamedSharding)
         for x in leaves):
    return None
  replicated = NamedSharding(leaves[0].sharding.mesh, P())
  return optax.tree_map_params(tx, lambda _, s: s, jax.eval_shape(tx.init, params),
                               jax.tree.map(lambda x: x.sharding, params),
                               transform_non_params=lambda _: replicated)


def abstract_like(tree):
  """Shape, dtype and sharding of every array: the target of a sharded restore."""
  return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), tree)
