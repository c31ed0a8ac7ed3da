"""Orbax checkpoints of the train state together with the data iterator.

Each checkpoint holds `state` (params, optimizer state, step), `data` (the
grain iterator's position, one file per process) and `meta` (the config and
tokenizer used, as JSON). Saves are atomic (orbax writes to a temporary
directory and renames), so a crash mid-save leaves the previous checkpoint as
the latest one.
"""

from __future__ import annotations

import os
from typing import Any

import grain
import orbax.checkpoint as ocp


class Checkpointer:

  def __init__(self, directory: str, save_every: int, keep: int = 3):
    self.directory = os.path.abspath(directory)
    self._mngr = ocp.CheckpointManager(
        self.directory,
        options=ocp.CheckpointManagerOptions(save_interval_steps=save_every, max_to_keep=keep,
                                             create=True))

  def latest_step(self) -> int | None:
    return self._mngr.latest_step()

  def should_save(self, step: int) -> bool:
    return self._mngr.should_save(step)

  def save(self, step: int, state: Any, data_iter, meta: dict, *, force: bool = False) -> bool:
    """`data_iter` None: a run whose data order is a pure function of the step (GRPO)."""
    items = {"state": ocp.args.StandardSave(state), "meta": ocp.args.JsonSave(meta)}
    if data_iter is not None:
      items["data"] = grain.checkpoint.CheckpointSave(data_iter)
    return self._mngr.save(step, args=ocp.args.Composite(**items), force=force)

  def restore(self, step: int, abstract_state: Any, data_iter=None) -> tuple[Any, dict]:
    """Restores `state` (sharded like `abstract_state`) and, if given, the iterator."""
    items = {"state": ocp.args.StandardRestore(abstract_state), "meta": ocp.args.JsonRestore()}
    if data_iter is not None:
      items["data"] = grain.checkpoint.CheckpointRestore(data_iter)
    out = self._mngr.restore(step, args=ocp.args.Composite(**items))
    return out["state"], out["meta"]

  def restore_meta(self, step: int) -> dict:
    return self._mngr.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))["meta"]

  def wait(self) -> None:
    self._mngr.wait_until_finished()

  def close(self) -> None:
    self._mngr.wait_until_finished()
    self._mngr.close()
