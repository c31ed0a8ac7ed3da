"""Orbax checkpoints of the train state together with the data iterator.

Each checkpoint holds `state` (params, optimizer state, step; every process
writes its own shards), `data` (the grain iterator's position, one file per
process) and `meta` (the config and tokenizer used, as JSON). Saves are
atomic (orbax writes to a temporary directory and renames), so a crash
mid-save leaves the previous checkpoint as the latest one.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from typing import Any

import orbax.checkpoint as ocp

from mdlm_wm.model.transformer import ModelConfig

# ModelConfig fields a run started from another workdir's params may change:
# they change how the params are used, not what they are (launch.import_hf
# writes causal-LM weights that an MDLM then fine-tunes bidirectionally).
FREE_MODEL_FIELDS = ("attention", "dtype", "remat")


class Checkpointer:

  def __init__(self, directory: str, save_every: int, keep: int = 3):
    self.directory = os.path.abspath(directory)
    self._mngr = ocp.CheckpointManager(
        self.directory,
        options=ocp.CheckpointManagerOptions(save_interval_steps=save_every, max_to_keep=keep,
                                             create=True))

  def latest_step(self) -> int | None:
    return self._mngr.latest_step()

  def all_steps(self) -> list[int]:
    return list(self._mngr.all_steps())

  def should_save(self, step: int) -> bool:
    return self._mngr.should_save(step)

  def save(self, step: int, state: Any, data_iter, meta: dict, *, force: bool = False) -> bool:
    """`data_iter` None: a run whose data order is a pure function of the step (GRPO)."""
    items = {"state": ocp.args.StandardSave(state), "meta": ocp.args.JsonSave(meta)}
    if data_iter is not None:
      items["data"] = _grain_checkpoint().CheckpointSave(data_iter)
    return self._mngr.save(step, args=ocp.args.Composite(**items), force=force)

  def restore(self, step: int, abstract_state: Any, data_iter=None) -> tuple[Any, dict]:
    """Restores `state` (sharded like `abstract_state`) and, if given, the iterator."""
    items = {"state": ocp.args.StandardRestore(abstract_state), "meta": ocp.args.JsonRestore()}
    if data_iter is not None:
      items["data"] = _grain_checkpoint().CheckpointRestore(data_iter)
    out = self._mngr.restore(step, args=ocp.args.Composite(**items))
    return out["state"], out["meta"]

  def data_states(self, step: int) -> list[dict]:
    """Every process's saved data-iterator state, in process order.

    grain writes `process_<p>-of-<P>.json` per process; a run resumed on a
    different number of processes reads them all (pipeline.relayout_state).
    """
    directory = os.path.join(self.directory, str(step), "data")
    counts = {int(m.group(1)) for f in os.listdir(directory)
              if (m := re.fullmatch(r"process_\d+-of-(\d+)\.json", f))}
    if len(counts) != 1:
      raise ValueError(f"{directory}: expected the files of one process count, found {counts}")
    n = counts.pop()
    states = []
    for p in range(n):
      with open(os.path.join(directory, f"process_{p}-of-{n}.json"), encoding="utf-8") as f:
        states.append(json.load(f))
    return states

  def restore_params(self, step: int, abstract_params: Any) -> Any:
    """The params of a checkpoint's state only, placed like `abstract_params`,
    whatever optimizer state the checkpoint holds besides them."""
    target = {"params": abstract_params}
    args = ocp.args.PyTreeRestore(
        item=target, restore_args=ocp.checkpoint_utils.construct_restore_args(target),
        partial_restore=True)
    return self._mngr.restore(step, args=ocp.args.Composite(state=args))["state"]["params"]

  def restore_meta(self, step: int) -> dict:
    return self._mngr.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))["meta"]

  def wait(self) -> None:
    self._mngr.wait_until_finished()

  def close(self) -> None:
    self._mngr.wait_until_finished()
    self._mngr.close()


def _grain_checkpoint():
  # Imported when a data iterator is saved or restored: loading a model for
  # inference (WorldModel.load) must not pull in grain.
  import grain  # pylint: disable=import-outside-toplevel
  return grain.checkpoint


def latest_meta(directory: str) -> tuple[int, dict] | None:
  """(step, meta) of the latest checkpoint in `directory`; None when there is
  none. A missing directory stays missing (the manager would create it)."""
  if not os.path.isdir(directory):
    return None
  ckpt = Checkpointer(directory, save_every=1)
  try:
    step = ckpt.latest_step()
    return None if step is None else (step, ckpt.restore_meta(step))
  finally:
    ckpt.close()


def init_params_from(directory: str, model_cfg: ModelConfig, abstract_params: Any,
                     step: int = 0) -> Any:
  """Params of the checkpoint `step` (0: the latest) in `directory` for a run of
  `model_cfg` (config.train.init_from / init_step); the saved model must match
  up to FREE_MODEL_FIELDS."""
  ckpt = Checkpointer(directory, save_every=1)
  if step and step not in ckpt.all_steps():
    raise FileNotFoundError(f"config.train.init_step: no step {step} in {directory} "
                            f"(it holds {sorted(ckpt.all_steps())})")
  step = step or ckpt.latest_step()
  if step is None:
    raise FileNotFoundError(f"config.train.init_from: no checkpoint in {directory}")
  saved = ModelConfig(**ckpt.restore_meta(step)["model"])
  differ = [f for f in dataclasses.fields(ModelConfig) if f.name not in FREE_MODEL_FIELDS
            and getattr(saved, f.name) != getattr(model_cfg, f.name)]
  if differ:
    hint = [f"--config.model.{f.name}={getattr(saved, f.name)}" if f.name != "vocab_size" else
            f"vocab {saved.vocab_size} (use the tokenizer.model saved with it)" for f in differ]
    raise ValueError(f"config.train.init_from: {directory} step {step} holds another model; "
                     f"to start from it set {' '.join(hint)}")
  params = ckpt.restore_params(step, abstract_params)
  ckpt.close()
  return params
