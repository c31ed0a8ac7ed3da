"""The training loop: one linear function, in the order a reader expects.

mesh -> the checkpoint's data layout -> tokenizer and data -> model and
optimizer (sharded at creation) -> jitted step with in/out shardings and
donated state -> restore if the workdir has a checkpoint -> loop (metrics
fetched one step late so the host never waits on the device; checkpoints on
an interval, at each evaluation step before it is evaluated, and on SIGTERM).

The same function runs every process of a multi-host job (after
jax.distributed.initialize, see train/distributed.py): each process reads its
own data shards, the global batch is assembled from the processes' rows, and
jax's preemption sync point makes every process save at the same step.

Randomness is stateless: step s uses fold_in(key(seed), s), so a resumed run
draws exactly the numbers the uninterrupted run would have drawn, and the
checkpoint needs no RNG beyond the seed in its meta.
"""

from __future__ import annotations

import dataclasses
import math
import os
import signal

import jax
import jax.numpy as jnp
import numpy as np
import optax
from absl import logging
from flax import nnx
from jax.experimental import multihost_utils

from mdlm_wm import config as config_lib
from mdlm_wm.data import pipeline
from mdlm_wm.data.serialize import Truncation
from mdlm_wm.data.tokenizer import Tokenizer
from mdlm_wm.model import sharding
from mdlm_wm.model.transformer import ModelConfig
from mdlm_wm.train import objectives
from mdlm_wm.train.checkpoint import Checkpointer, init_params_from
from mdlm_wm.train.metrics import MetricsWriter, StepProgress, Throughput
from mdlm_wm.train.state import (CHECKPOINT_DIR, TOKENIZER_FILE, abstract_like, create_model,
                                 init_train_state, make_optimizer)


@dataclasses.dataclass
class TrainResult:
  step: int
  loss: float
  valid_loss: float | None
  tokens_per_sec: float
  preempted: bool = False
  steps_run: int = 0  # 0: the workdir was already at config.train.steps

  def summary(self) -> str:
    """The launchers' last line."""
    if not self.steps_run:
      return nothing_to_train(self.step)
    valid = "none" if self.valid_loss is None else f"{self.valid_loss:.4f}"
    return (f"done: step {self.step}, loss {self.loss:.4f}, valid loss {valid}, "
            f"{self.tokens_per_sec:.0f} tokens/s")


def nothing_to_train(step: int) -> str:
  """A launcher's last line when its workdir was already finished."""
  return (f"nothing to train: the workdir is already at step {step} "
          "(raise --config.train.steps to go on)")


def pipeline_config(cfg, *, batch_size: int | None = None, seed_offset: int = 0,
                    num_epochs: int | None = None, shuffle: bool = True) -> pipeline.PipelineConfig:
  """The data pipeline of an experiment config (mdlm_wm/config.py)."""
  d = cfg.data
  return pipeline.PipelineConfig(
      batch_size=batch_size or d.batch_size, seq_len=d.seq_len,
      max_context_len=d.max_context_len, max_target_len=d.max_target_len,
      history_len=d.history_len, tools_format=config_lib.tools_format(cfg),
      ablate=config_lib.ablated(cfg), target=config_lib.target(cfg),
      block_size=config_lib.block_size(cfg),
      shift=bool(cfg.diffusion.get("shift", False)),
      clean_labels=config_lib.causal_clean(cfg), seed=cfg.seed + seed_offset,
      num_epochs=num_epochs, shuffle=shuffle, read_threads=d.read_threads)


def make_train_step(graphdef, obj_cfg: objectives.ObjectiveConfig, tx):
  """state, batch, rng -> state, metrics.

  A non-finite loss or gradient never reaches the params: the step keeps the
  old state and reports `finite: False`; the host then stops or skips
  (config.train.nan_policy).
  """

  def step_fn(state, batch, rng):
    def loss_of(params):
      model = nnx.merge(graphdef, params)
      return objectives.loss_fn(model, batch, rng, obj_cfg, train=True, step=state["step"])

    (loss, metrics), grads = jax.value_and_grad(loss_of, has_aux=True)(state["params"])
    new_state, health = apply_gradients(state, loss, grads, tx)
    return new_state, {**metrics, **health}

  return step_fn


def apply_gradients(state, loss, grads, tx):
  """One optimizer update that a non-finite loss or gradient cannot reach.

  Returns (new state, {"grad_norm", "finite"}); when not finite the old
  state comes back unchanged (step counter included).
  """
  updates, opt_state = tx.update(grads, state["opt_state"], state["params"])
  params = optax.apply_updates(state["params"], updates)
  grad_norm = optax.tree.norm(grads)
  ok = jnp.isfinite(loss) & jnp.isfinite(grad_norm)
  keep = lambda new, old: jax.tree.map(lambda n, o: jnp.where(ok, n, o), new, old)
  new_state = {"params": keep(params, state["params"]),
               "opt_state": keep(opt_state, state["opt_state"]),
               "step": state["step"] + ok.astype(jnp.int32)}
  return new_state, {"grad_norm": grad_norm, "finite": ok}


def make_eval_step(graphdef, obj_cfg):

  def eval_fn(params, batch, rng):
    model = nnx.merge(graphdef, params)
    _, metrics = objectives.loss_fn(model, batch, rng, obj_cfg, train=False)
    return metrics

  return eval_fn


class Preemption:
  """Turns SIGTERM into a save-and-stop decision the loop takes between steps.

  One process: a Python SIGTERM handler sets `requested`. Several processes
  (jax.distributed): jax's preemption service owns SIGTERM (its handler is
  installed by jax.distributed.initialize, so none is installed here); a
  notice to any process reaches all of them and names one sync step, at which
  `reached` is True everywhere, so every process saves the same checkpoint.
  """

  def __init__(self):
    self.requested = False
    self._previous = None

  def reached(self, step: int) -> bool:
    """Save and stop after `step`? Called after every step, on every process."""
    if jax.process_count() > 1:
      return multihost_utils.reached_preemption_sync_point(step)
    return self.requested

  def __enter__(self):
    if jax.process_count() > 1:
      return self
    try:
      self._previous = signal.signal(signal.SIGTERM, self._handle)
    except ValueError:  # not the main thread (e.g. a notebook worker): no handler
      self._previous = None
    return self

  def _handle(self, signum, frame):
    del signum, frame
    self.requested = True

  def __exit__(self, *exc):
    if self._previous is not None:
      signal.signal(signal.SIGTERM, self._previous)


def _global_batch(local: dict[str, np.ndarray], batch_sharding) -> dict[str, jax.Array]:
  return {k: jax.make_array_from_process_local_data(batch_sharding, v) for k, v in local.items()}


def _tokens_in(batch: dict[str, np.ndarray]) -> int:
  return int(np.sum(batch["segment_ids"] > 0))


class _NoMetrics:
  """The metric sinks of processes other than 0: one process writes the files."""

  def write(self, step: int, metrics: dict) -> None:
    del step, metrics

  def update(self, step: int, metrics: dict, force: bool = False) -> None:
    del step, metrics, force

  def close(self) -> None:
    pass


def _missing_valid_loss(writer, step: int) -> bool:
  """Whether process 0's metrics.jsonl lacks `step`'s valid_loss, agreed by every process."""
  missing = jax.process_index() == 0 and "valid_loss" not in writer.logged_keys(step)
  if jax.process_count() > 1:  # the evaluation is a collective: every process must take it
    missing = bool(multihost_utils.broadcast_one_to_all(np.int32(missing)))
  return missing


def _data_shards(requested: int, saved_meta: dict | None, process_count: int) -> int:
  """How many data shards make a global batch (pipeline.make_sharded_dataset).

  Default: the checkpoint's count when resuming (the data order goes on even
  on another number of processes), else one per process. Checkpoints older
  than this setting were written by one process reading one shard.
  """
  saved = None if saved_meta is None else saved_meta.get("data_shards", 1)
  shards = requested or saved or process_count
  if saved is not None and shards != saved:
    raise ValueError(f"the checkpoint's data was read in {saved} shards, not {shards}: resume "
                     f"with data_shards={saved} (or 0)")
  if shards % process_count:
    raise ValueError(f"data_shards ({shards}) must be a multiple of the process count "
                     f"({process_count})")
  return shards


def train(cfg, workdir: str, *, max_steps: int | None = None, data_shards: int = 0) -> TrainResult:
  """Trains (or resumes) the model of `cfg` in `workdir`.

  `max_steps` stops early after that many steps of this call (tests use it to
  simulate an interrupted run); the schedule still follows cfg.train.steps.
  `data_shards` (0: the checkpoint's, else one per process) fixes the global
  batches independently of the number of processes (pipeline.make_sharded_dataset).
  Every process of a jax.distributed job calls this; process 0 alone writes
  the tokenizer and metrics, all of them write the checkpoints.
  """
  config_lib.validate(cfg)
  # --- mesh
  devices = jax.devices()[:cfg.mesh.num_devices] if cfg.mesh.num_devices else None
  mesh = sharding.make_mesh(cfg.mesh.shape, devices)
  rules = sharding.rules_dict(cfg.mesh.rules)
  n_batch_shards = mesh.shape["data"] * mesh.shape["fsdp"]
  if cfg.data.batch_size % n_batch_shards:
    raise ValueError(f"config.data.batch_size ({cfg.data.batch_size}) must be divisible by "
                     f"data x fsdp = {n_batch_shards}")
  batch_sh = sharding.batch_sharding(mesh)
  repl = sharding.replicated(mesh)
  pcount, pindex = jax.process_count(), jax.process_index()
  chief = pindex == 0

  # --- checkpoint layout: a resumed run keeps its data shards
  ckpt = Checkpointer(os.path.join(workdir, CHECKPOINT_DIR), cfg.train.checkpoint_every,
                      cfg.train.keep_checkpoints)
  start = ckpt.latest_step()
  saved_meta = ckpt.restore_meta(start) if start is not None else None
  shards = _data_shards(data_shards, saved_meta, pcount)
  if cfg.data.batch_size % shards:
    raise ValueError(f"config.data.batch_size ({cfg.data.batch_size}) must be divisible by "
                     f"the {shards} data shards")
  per_process = shards // pcount
  shard_ids = range(pindex * per_process, (pindex + 1) * per_process)

  # --- tokenizer and data
  if not cfg.data.tokenizer:
    raise ValueError("config.data.tokenizer: give a tokenizer.model (build_corpus writes one)")
  tokenizer = Tokenizer.load(cfg.data.tokenizer)
  # The workdir carries its own tokenizer, so a checkpoint loads anywhere.
  if chief:
    os.makedirs(workdir, exist_ok=True)
    tokenizer.save(os.path.join(workdir, TOKENIZER_FILE))
  shard_batch = cfg.data.batch_size // shards
  train_ds, rows = pipeline.make_sharded_dataset(
      config_lib.split_paths(cfg.data.train), tokenizer,
      pipeline_config(cfg, batch_size=shard_batch), shard_ids=shard_ids,
      shard_count=shards)
  train_iter = iter(train_ds)
  valid_batches = []
  if cfg.data.valid and cfg.train.eval_batches:
    valid_ds, _ = pipeline.make_sharded_dataset(
        config_lib.split_paths(cfg.data.valid), tokenizer,
        pipeline_config(cfg, batch_size=shard_batch, shuffle=False),
        shard_ids=shard_ids, shard_count=shards)
    valid_it = iter(valid_ds)
    valid_batches = [next(valid_it) for _ in range(cfg.train.eval_batches)]

  # --- model, optimizer, state
  model_cfg = config_lib.model_config(cfg, tokenizer.vocab_size)
  graphdef, params = create_model(model_cfg, mesh, rules, cfg.seed)
  tx, lr_schedule = make_optimizer(cfg)
  with jax.set_mesh(mesh):
    state = init_train_state(params, tx)
  state_sh = jax.tree.map(lambda x: x.sharding, state)
  logging.info("model: %s params, %.3g train FLOPs/token at seq_len %d, attention %s",
               f"{model_cfg.num_params():,}", model_cfg.flops_per_token(cfg.data.seq_len),
               cfg.data.seq_len, model_cfg.attention)
  print(f"model: {model_cfg.num_params():,} params | "
        f"{model_cfg.flops_per_token(cfg.data.seq_len):.3g} train FLOPs/token | "
        f"{cfg.objective} ({model_cfg.attention} attention) | mesh {dict(mesh.shape)}", flush=True)

  # --- steps
  obj_cfg = objectives.objective_config(cfg, tokenizer.mask_id)
  train_step = jax.jit(make_train_step(graphdef, obj_cfg, tx),
                       in_shardings=(state_sh, batch_sh, repl), out_shardings=(state_sh, repl),
                       donate_argnums=(0,))
  eval_step = jax.jit(make_eval_step(graphdef, obj_cfg),
                      in_shardings=(state_sh["params"], batch_sh, repl), out_shardings=repl)
  base_key = jax.random.key(cfg.seed)
  eval_key = jax.random.key(cfg.seed + 1)

  # --- resume if there is a checkpoint
  meta = {"config": cfg.to_dict(), "model": dataclasses.asdict(model_cfg),
          "tokenizer": TOKENIZER_FILE, "seed": cfg.seed, "data_shards": shards,
          "process_count": pcount}
  if start is not None:
    # Compared as configs: older metas lack newer fields and hold remat as a bool.
    if saved_meta.get("model") is None or ModelConfig(**saved_meta["model"]) != model_cfg:
      raise ValueError(f"{workdir} holds a checkpoint of a different model: "
                       f"{saved_meta.get('model')} vs {meta['model']}")
    # grain keeps one file per process: another process count reads them all.
    same_layout = saved_meta.get("process_count", 1) == pcount
    state, _ = ckpt.restore(start, abstract_like(state), train_iter if same_layout else None)
    if not same_layout:
      train_iter.set_state(pipeline.relayout_state(ckpt.data_states(start), shards, shard_ids))
    print(f"resumed from step {start}", flush=True)
  elif cfg.train.get("init_from"):  # issue 9 hook: start from another workdir's params
    state["params"] = init_params_from(os.path.join(cfg.train.init_from, CHECKPOINT_DIR),
                                       model_cfg, abstract_like(state["params"]),
                                       cfg.train.get("init_step", 0))
    print(f"params from {cfg.train.init_from}"
          + (f" step {cfg.train.init_step}" if cfg.train.get("init_step") else ""), flush=True)
  start = start or 0
  writer = (MetricsWriter(workdir, resume_step=start if start else None,
                          tensorboard=cfg.train.tensorboard) if chief else _NoMetrics())

  # --- loop
  total = cfg.train.steps
  stop_at = min(total, start + max_steps) if max_steps is not None else total
  progress = StepProgress(total, start) if chief else _NoMetrics()
  throughput = Throughput()
  pending = None  # (step, device metrics, tokens): fetched one step late
  last = {"loss": math.nan}
  valid_loss = None
  tokens_per_sec = 0.0
  preempted = False

  def eval_due(step: int) -> bool:
    return bool(valid_batches) and (step % cfg.train.eval_every == 0 or step == stop_at)

  def run_eval(step: int) -> None:
    nonlocal valid_loss
    with throughput.paused():
      evals = [jax.device_get(eval_step(state["params"], _global_batch(b, batch_sh),
                                        jax.random.fold_in(eval_key, i)))
               for i, b in enumerate(valid_batches)]
    valid_loss = float(np.mean([float(m["loss"]) for m in evals]))
    logged = {"valid_loss": valid_loss}
    if "clean_ar" in evals[0]:
      # The clean copy's next-token loss: the same quantity as an AR's valid_loss.
      logged["valid_clean_ar"] = float(np.mean([float(m["clean_ar"]) for m in evals]))
    writer.write(step, logged)
    progress.update(step, {"loss": last["loss"], "valid_loss": valid_loss}, force=True)

  def flush(p) -> None:
    nonlocal last, tokens_per_sec
    step, dev_metrics, tokens = p
    m = {k: float(v) for k, v in jax.device_get(dev_metrics).items()}
    throughput.add(tokens)
    if not m.pop("finite"):
      if cfg.train.nan_policy == "stop":
        ckpt.wait()  # the error names the last checkpoint: it must be on disk, not in flight
        raise FloatingPointError(
            f"non-finite loss or gradient at step {step} (loss {m['loss']}); the update was "
            f"not applied; the last checkpoint is step {ckpt.latest_step()} in "
            f"{ckpt.directory}. Lower config.optim.lr or set config.train.nan_policy=skip.")
      logging.warning("step %d: non-finite loss; update skipped", step)
      m["skipped"] = 1.0
    last = m
    if step % cfg.train.log_every == 0 or step == stop_at:
      tokens_per_sec = throughput.rate()
      m.update(tokens_per_sec=tokens_per_sec, learning_rate=float(lr_schedule(step - 1)))
      writer.write(step, m)
      progress.update(step, m)

  # finally: a crash (a non-finite loss included) still waits for the saves in flight, so the
  # checkpoint the error names is on disk.
  try:
    if start and eval_due(start) and _missing_valid_loss(writer, start):
      run_eval(start)  # the previous run saved this step and stopped during its evaluation
    with Preemption() as preemption:
      for step in range(start + 1, stop_at + 1):
        local = next(train_iter)
        batch = _global_batch(local, batch_sh)
        state, dev_metrics = train_step(state, batch, jax.random.fold_in(base_key, step))
        if pending is not None:
          flush(pending)
        pending = (step, dev_metrics, _tokens_in(local) * pcount)
        preempt = preemption.reached(step)
        # An evaluation step is saved before it is evaluated: a crash in the evaluation
        # loses no training, and the rerun evaluates the step it restores.
        if ckpt.should_save(step) or preempt or step == stop_at or eval_due(step):
          flush(pending)  # never checkpoint a state whose step has not been checked
          pending = None
          ckpt.save(step, state, train_iter, meta, force=True)
        if preempt:  # a due evaluation runs on resume, not inside the grace period
          print(f"SIGTERM: saved a checkpoint at step {step}; exiting", flush=True)
          preempted = True
          break
        if eval_due(step):
          run_eval(step)
    if pending is not None:
      flush(pending)
  finally:
    ckpt.close()
    writer.close()
  trunc = Truncation()
  for r in rows:
    trunc.add(r.truncation)
  if trunc.any_cut():
    print(f"truncation (examples read in this run; anchors whole in "
          f"{trunc.anchors_whole():.1%}): {trunc.as_dict()}", flush=True)
  end = step if stop_at > start else start
  return TrainResult(step=end, loss=last["loss"], valid_loss=valid_loss,
                     tokens_per_sec=tokens_per_sec, preempted=preempted, steps_run=end - start)
