"""The device mesh and the logical -> mesh axis rules.

Layers name their parameter axes logically (`embed`, `mlp`, `heads`, ...);
the config's rules map each logical name to a mesh axis (or None:
replicated). Data parallelism shards the batch over (`data`, `fsdp`); FSDP
shards parameters' `embed` axis over `fsdp`; tensor parallelism shards heads
and the MLP hidden axis over `tensor`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import jax
import numpy as np
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

MESH_AXES = ("data", "fsdp", "tensor")
BATCH = ("data", "fsdp")

DEFAULT_RULES = (
    ("batch", BATCH),
    ("vocab", "tensor"),
    ("embed", "fsdp"),
    ("heads", "tensor"),
    ("kv_heads", "tensor"),
    ("mlp", "tensor"),
    ("norm", None),
)


def make_mesh(shape: Sequence[int], devices=None) -> jax.sharding.Mesh:
  """A (data, fsdp, tensor) mesh; -1 in one place takes the remaining devices."""
  devices = list(devices if devices is not None else jax.devices())
  shape = list(shape)
  if shape.count(-1) > 1:
    raise ValueError(f"mesh shape {shape}: at most one -1")
  if -1 in shape:
    known = int(np.prod([s for s in shape if s != -1]))
    shape[shape.index(-1)] = len(devices) // max(known, 1)
  if int(np.prod(shape)) != len(devices):
    raise ValueError(f"mesh shape {tuple(shape)} needs {int(np.prod(shape))} devices; "
                     f"{len(devices)} available")
  # Auto axes: jit's in/out shardings drive GSPMD propagation, so layer code
  # need not annotate every intermediate.
  return jax.make_mesh(tuple(shape), MESH_AXES, axis_types=(AxisType.Auto,) * 3,
                       devices=devices)


def logical_to_mesh(names: Sequence[str | None], rules: Mapping[str, object]) -> tuple:
  """Maps logical axis names to mesh axes with `rules` (missing name: replicated)."""
  return tuple(rules.get(n) if n is not None else None for n in names)


def rules_dict(rules) -> dict[str, object]:
  """Accepts a dict or a sequence of (name, axes) pairs; tuples stay tuples."""
  items = rules.items() if isinstance(rules, Mapping) else rules
  return {k: (tuple(v) if isinstance(v, (list, tuple)) else v) for k, v in items}


def batch_sharding(mesh: jax.sharding.Mesh, ndim: int = 2) -> NamedSharding:
  """Shards the leading (batch) axis over data x fsdp; the rest replicated."""
  return NamedSharding(mesh, P(BATCH, *([None] * (ndim - 1))))


def replicated(mesh: jax.sharding.Mesh) -> NamedSharding:
  return NamedSharding(mesh, P())
