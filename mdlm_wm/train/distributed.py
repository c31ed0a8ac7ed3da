"""Joining a multi-process JAX job: jax.distributed, configured from flags or the environment.

Every process of a multi-host run (a TPU pod slice, a SLURM job, processes
started by hand) calls `initialize` once, before any other JAX call. After
it, `jax.devices()` lists every process's devices, the mesh spans them, jitted
steps communicate across processes (NCCL on GPUs, ICI/DCN on TPUs, gloo on
CPUs) and orbax writes one checkpoint from all of them.

Each setting comes from, in order:
  * an explicit value (launch.train's --coordinator_address, --num_processes,
    --process_id);
  * the environment: COORDINATOR_ADDRESS, NUM_PROCESSES, PROCESS_ID (the
    plain recipe for processes started by hand);
  * jax.distributed.initialize's own cluster detection (Cloud TPU, SLURM,
    Open MPI, Kubernetes), when `auto` is set (launch.train --distributed).
With none of these the run is one process and nothing is initialized.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

import jax

ENV_VARS = ("COORDINATOR_ADDRESS", "NUM_PROCESSES", "PROCESS_ID")


@dataclasses.dataclass(frozen=True)
class Settings:
  """What `initialize` passes to jax.distributed.initialize (None: detect)."""
  coordinator_address: str | None = None
  num_processes: int | None = None
  process_id: int | None = None
  auto: bool = False

  @property
  def enabled(self) -> bool:
    return self.auto or self.num_processes is not None or self.coordinator_address is not None


def resolve(coordinator_address: str = "", num_processes: int = 0, process_id: int = -1,
            auto: bool = False, environ: Mapping[str, str] = os.environ) -> Settings:
  """Settings from explicit values ("", 0, -1: unset), then the environment.

  Without `auto`, explicit settings must be complete: a partial set would
  otherwise fall through to jax's cluster detection and fail far from here.
  """
  address = coordinator_address or environ.get("COORDINATOR_ADDRESS") or None
  count = num_processes or _int_env(environ, "NUM_PROCESSES")
  pid = process_id if process_id >= 0 else _int_env(environ, "PROCESS_ID")
  given = {"coordinator_address": address, "num_processes": count, "process_id": pid}
  if not auto and any(v is not None for v in given.values()):
    missing = [k for k, v in given.items() if v is None]
    if missing:
      raise ValueError(f"multi-process settings incomplete: {', '.join(missing)} not set "
                       f"(flags --{' --'.join(missing)} or env {', '.join(ENV_VARS)}); "
                       f"or pass --distributed to let jax detect them")
  if count is not None and count < 1:
    raise ValueError(f"num_processes must be >= 1, got {count}")
  if pid is not None and count is not None and not 0 <= pid < count:
    raise ValueError(f"process_id must be in [0, {count}), got {pid}")
  return Settings(address, count, pid, auto)


def _int_env(environ: Mapping[str, str], name: str) -> int | None:
  value = environ.get(name, "")
  if not value:
    return None
  try:
    return int(value)
  except ValueError:
    raise ValueError(f"environment variable {name}={value!r} is not an integer") from None


def initialize(settings: Settings, timeout_s: int = 300) -> bool:
  """jax.distributed.initialize with `settings`; returns False (and does
  nothing) for a single-process run."""
  if not settings.enabled:
    return False
  jax.distributed.initialize(coordinator_address=settings.coordinator_address,
                             num_processes=settings.num_processes,
                             process_id=settings.process_id,
                             initialization_timeout=timeout_s)
  return True


def describe() -> str:
  """One line naming this process and its devices (a multi-host log's first line)."""
  return (f"process {jax.process_index()}/{jax.process_count()}: "
          f"{jax.local_device_count()} local of {jax.device_count()} {jax.default_backend()} "
          f"devices")
