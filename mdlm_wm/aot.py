"""Ahead-of-time compilation: memory and FLOPs per device before step 1.

The train step of a config (and the MDLM sampler at the config's sample
settings) is lowered and compiled for a mesh of devices that need not exist:
parameters, optimizer state and batches are `jax.ShapeDtypeStruct`s with the
shardings training would give them, so nothing is allocated. The devices are
  * simulated CPU devices (`jax_num_cpu_devices`, or the older
    XLA_FLAGS=--xla_force_host_platform_device_count=N): XLA's CPU compiler,
    so sizes follow CPU fusion and layouts (it also keeps bf16 matmul
    operands in f32 buffers), an estimate of an accelerator's numbers;
  * compile-only TPU devices of a named topology (`topology="v5e:2x4"`;
    needs libtpu, e.g. `pip install "jax[tpu]"`, but no TPU): XLA's TPU
    compiler, i.e. the sizes a real slice would report.

`compiled.memory_analysis()` gives per-device bytes of arguments, outputs
(aliased with donated arguments), temporaries and generated code;
`compiled.cost_analysis()` the FLOPs XLA counts per device (rematerialized
work included). Expected step time and tokens/s/chip follow from the model's
own FLOPs (ModelConfig.flops_per_token: 6N plus attention), the number of
chips and a stated MFU and peak: the usual definition of MFU.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import optax

from mdlm_wm import config as config_lib
from mdlm_wm.data import block_rows
from mdlm_wm.data import tokenizer as tokenizer_lib
from mdlm_wm.diffusion import block_sampler
from mdlm_wm.diffusion import sampler as mdlm_sampler
from mdlm_wm.model import sharding
from mdlm_wm.model.transformer import ModelConfig, abstract_model
from mdlm_wm.train import objectives, trainer
from mdlm_wm.train import state as train_state

GIB = 1024 ** 3
# Dense bf16 peak (TFLOP/s) and HBM (GiB) per chip of the TPU kinds a
# topology names; vendor figures.
TPU_CHIPS = {"TPU v4": (275.0, 32.0), "TPU v5 lite": (197.0, 16.0), "TPU v5": (459.0, 95.0),
             "TPU v6 lite": (918.0, 32.0)}
# Project tokenizer layout (tokenizer.py): pad, unk, then SPECIAL_TOKENS.
_MASK_ID = 2 + tokenizer_lib.SPECIAL_TOKENS.index(tokenizer_lib.MASK)
_EOT_ID = 2 + tokenizer_lib.SPECIAL_TOKENS.index(tokenizer_lib.EOT)
BATCH_KEYS = ("tokens", "target_mask", "steer_mask", "segment_ids", "positions")


@dataclasses.dataclass(frozen=True)
class Assumptions:
  """What turns FLOPs into time: the MFU and the per-chip peak are stated, not measured."""
  mfu: float = 0.4
  peak_tflops: float = 197.0  # TPU v5e bf16
  hbm_gib: float = 16.0


def devices_for(topology: str = "", num_devices: int = 0) -> list:
  """Compile-only TPU devices of `topology`, or this process's devices; the first n if given."""
  if topology:
    from jax.experimental import topologies  # pylint: disable=g-import-not-at-top
    devices = list(topologies.get_topology_desc(topology, "tpu").devices)
  else:
    devices = jax.devices()
  if num_devices:
    if num_devices > len(devices):
      raise ValueError(f"{num_devices} devices requested; {len(devices)} available (set "
                       "--devices, or XLA_FLAGS=--xla_force_host_platform_device_count=N)")
    devices = devices[:num_devices]
  return devices


def abstract_train_state(params, tx, mesh):
  """The trainer's state as ShapeDtypeStructs: Adam moments sharded like their
  params, counters and the step replicated (train_state.init_train_state)."""
  repl = sharding.replicated(mesh)
  opt_shapes = jax.eval_shape(tx.init, params)
  opt_sh = optax.tree_map_params(tx, lambda _, p: p.sharding, opt_shapes, params,
                                 transform_non_params=lambda _: repl)
  opt_state = jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
                           opt_shapes, opt_sh)
  step = jax.ShapeDtypeStruct((), jnp.int32, sharding=repl)
  return {"params": params, "opt_state": opt_state, "step": step}


def _key(mesh):
  return jax.ShapeDtypeStruct((), jax.random.key(0).dtype, sharding=sharding.replicated(mesh))


def memory_and_flops(compiled) -> dict:
  """Per-device bytes and FLOPs of a compiled executable.

  `peak_bytes` = arguments + outputs - aliased + temporaries + code: live at
  once at the executable's high-water mark (donated inputs counted once).
  """
  m = compiled.memory_analysis()
  cost = compiled.cost_analysis()
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost  # older jax: one per module
  out = {"argument_bytes": m.argument_size_in_bytes, "output_bytes": m.output_size_in_bytes,
         "alias_bytes": m.alias_size_in_bytes, "temp_bytes": m.temp_size_in_bytes,
         "generated_code_bytes": m.generated_code_size_in_bytes}
  out["peak_bytes"] = (out["argument_bytes"] + out["output_bytes"] - out["alias_bytes"]
                       + out["temp_bytes"] + out["generated_code_bytes"])
  out["flops"] = float(cost.get("flops", 0.0)) if cost else 0.0
  return out


def compile_train_step(cfg, mesh, vocab_size: int) -> tuple[dict, ModelConfig]:
  """Lowers and compiles the train step of `cfg` on `mesh`; returns (figures, model config)."""
  model_cfg = config_lib.model_config(cfg, vocab_size)
  rules = sharding.rules_dict(cfg.mesh.rules)
  graphdef, params = abstract_model(model_cfg, mesh, rules)
  tx, _ = train_state.make_optimizer(cfg)
  state = abstract_train_state(params, tx, mesh)
  state_sh = jax.tree.map(lambda x: x.sharding, state)
  B, L = cfg.data.batch_size, cfg.data.seq_len
  batch_sh = sharding.batch_sharding(mesh)
  keys = ((*block_rows.ROW_FEATURES, "segment_ids", "positions")
          if config_lib.block_size(cfg) else BATCH_KEYS)
  batch = {k: jax.ShapeDtypeStruct((B, L), jnp.int32, sharding=batch_sh)
           for k in keys if k != "pos"}
  obj = objectives.objective_config(cfg, _MASK_ID)
  repl = sharding.replicated(mesh)
  step = jax.jit(trainer.make_train_step(graphdef, obj, tx),
                 in_shardings=(state_sh, batch_sh, repl), out_shardings=(state_sh, repl),
                 donate_argnums=(0,))
  return _compile(step, state, batch, _key(mesh)), model_cfg


def compile_sampler(cfg, mesh, vocab_size: int, batch: int) -> dict:
  """Compiles one MDLM sampler call (B prompts x G samples, the config's context
  and canvas lengths and sample settings), params sharded as in training and
  the host inputs replicated, as WorldModel passes them."""
  c = cfg.copy_and_resolve_references()
  c.objective = "mdlm"
  if config_lib.attention_mode(c) == "causal":
    c.model.attention = "auto"
  model_cfg = config_lib.model_config(c, vocab_size)
  graphdef, params = abstract_model(model_cfg, mesh, sharding.rules_dict(cfg.mesh.rules))
  s = cfg.sample
  # The sampler the model would use: blocks over a KV cache for a block model.
  scfg = config_lib.sampler_config(
      c, use_prefix_cache=s.use_prefix_cache and model_cfg.attention == "prefix")
  C, T = cfg.data.max_context_len, cfg.data.max_target_len
  repl = sharding.replicated(mesh)
  arg = lambda shape, dtype: jax.ShapeDtypeStruct(shape, dtype, sharding=repl)

  def sample(params, context, valid, fixed, rng):
    if isinstance(scfg, block_sampler.BlockSamplerConfig):
      return block_sampler.sample(graphdef, params, context, valid, fixed, rng, scfg,
                                  num_samples=s.num_samples, mask_id=_MASK_ID,
                                  eot_id=_EOT_ID)[0]
    return mdlm_sampler.sample(graphdef, params, context, valid, fixed, rng, scfg,
                               num_samples=s.num_samples, mask_id=_MASK_ID).tokens_BGT

  out = _compile(jax.jit(sample), params, arg((batch, C), jnp.int32), arg((batch, C), bool),
                 arg((batch, T), jnp.int32), _key(mesh))
  out.update(batch=batch, num_samples=s.num_samples, steps=s.steps, context_len=C, target_len=T,
             block_size=scfg.block_size, kv_cache_blocks=isinstance(
                 scfg, block_sampler.BlockSamplerConfig),
             use_prefix_cache=getattr(scfg, "use_prefix_cache", False))
  return out


def _compile(fn, *args) -> dict:
  """Figures of `fn` compiled for `args`; a compiler that refuses for lack of
  memory (the TPU compiler checks HBM) gives {"error": its message} instead."""
  t0 = time.perf_counter()
  lowered = fn.lower(*args)
  t1 = time.perf_counter()
  try:
    compiled = lowered.compile()
  except jax.errors.JaxRuntimeError as e:
    if "RESOURCE_EXHAUSTED" not in str(e):
      raise
    out = {"error": str(e).splitlines()[0], "lower_s": t1 - t0,
           "compile_s": time.perf_counter() - t1}
    needed = re.search(r"HLO temporaries \(([\d.]+)G\)", str(e))
    if needed:
      out["temp_bytes"] = int(float(needed.group(1)) * GIB)  # what the compiler asked for
    return out
  t2 = time.perf_counter()
  return {**memory_and_flops(compiled), "lower_s": t1 - t0, "compile_s": t2 - t1}


def expected_throughput(model_cfg: ModelConfig, cfg, num_chips: int, a: Assumptions) -> dict:
  """Step time and tokens/s/chip at the stated MFU and peak (model FLOPs)."""
  tokens = cfg.data.batch_size * cfg.data.seq_len
  flops_per_token = model_cfg.flops_per_token(cfg.data.seq_len)
  per_chip = flops_per_token * tokens / num_chips
  step_s = per_chip / (a.mfu * a.peak_tflops * 1e12)
  return {"tokens_per_step": tokens, "model_flops_per_token": flops_per_token,
          "model_flops_per_step_per_chip": per_chip, "step_s": step_s,
          "tokens_per_s_per_chip": tokens / num_chips / step_s}


def analyze(cfg, mesh_shape: Sequence[int] | None = None, *, vocab_size: int = 0,
            topology: str = "", num_devices: int = 0, mfu: float = 0.4,
            peak_tflops: float | None = None, hbm_gib: float | None = None,
            sampler: bool = True, sample_batch: int = 8) -> dict:
  """The full report: mesh, params, train step (and sampler) memory/FLOPs, expected speed.

  `mesh_shape` None takes config.mesh.shape; `vocab_size` 0 takes
  config.corpus.tokenizer_vocab. `peak_tflops` / `hbm_gib` None take the
  topology's chip when it is a known TPU kind, else TPU v5e's figures.
  """
  config_lib.validate(cfg)
  devices = devices_for(topology, num_devices)
  mesh = sharding.make_mesh(cfg.mesh.shape if mesh_shape is None else mesh_shape, devices)
  vocab_size = vocab_size or cfg.corpus.tokenizer_vocab
  kind = devices[0].device_kind
  default = Assumptions()
  chip_peak, chip_hbm = TPU_CHIPS.get(kind, (default.peak_tflops, default.hbm_gib))
  a = Assumptions(mfu, chip_peak if peak_tflops is None else peak_tflops,
                  chip_hbm if hbm_gib is None else hbm_gib)
  train, model_cfg = compile_train_step(cfg, mesh, vocab_size)
  n = mesh.devices.size
  train["fits"] = "error" not in train and train["peak_bytes"] <= a.hbm_gib * GIB
  report = {
      "device_kind": kind, "platform": devices[0].platform, "topology": topology or None,
      "mesh": dict(mesh.shape), "num_devices": n, "objective": cfg.objective,
      "params": model_cfg.num_params(), "vocab_size": vocab_size, "remat": model_cfg.remat,
      "dtype": model_cfg.dtype, "batch_size": cfg.data.batch_size, "seq_len": cfg.data.seq_len,
      "assumptions": dataclasses.asdict(a), "train": train,
      "expected": expected_throughput(model_cfg, cfg, n, a)}
  if sampler:
    report["sampler"] = compile_sampler(cfg, mesh, vocab_size, sample_batch)
  return report


def format_report(r: dict) -> str:
  """The human-readable summary printed by launch.aot."""
  gib = lambda b: f"{b / GIB:.2f} GiB" if b >= GIB / 4 else f"{b / 2**20:.1f} MiB"
  a, t, e = r["assumptions"], r["train"], r["expected"]
  lines = [
      f"{r['params'] / 1e6:,.1f}M params (vocab {r['vocab_size']}), {r['objective']}, "
      f"{r['dtype']} compute, remat {r['remat']}, batch {r['batch_size']} x {r['seq_len']}",
      f"mesh {r['mesh']} on {r['num_devices']} x {r['device_kind']} ({r['platform']}"
      f"{', topology ' + r['topology'] if r['topology'] else ''})",
      "train step, per device:"]
  if "error" in t:
    lines.append(f"  does NOT fit in {a['hbm_gib']:g} GiB: the compiler refused: {t['error']}")
  else:
    lines += [
        f"  arguments {gib(t['argument_bytes'])} | outputs {gib(t['output_bytes'])} "
        f"(aliased {gib(t['alias_bytes'])}) | temporaries {gib(t['temp_bytes'])} | "
        f"code {t['generated_code_bytes'] / 2**20:.1f} MiB",
        f"  peak {gib(t['peak_bytes'])} -> {'fits' if t['fits'] else 'does NOT fit'} in "
        f"{a['hbm_gib']:g} GiB",
        f"  XLA FLOPs {t['flops']:.3g} per device; model FLOPs "
        f"{e['model_flops_per_step_per_chip']:.3g} per chip "
        f"({e['model_flops_per_token']:.3g} per token)"]
  lines += [
      f"  compile {t['lower_s']:.1f}s lower + {t['compile_s']:.1f}s compile",
      f"expected at MFU {a['mfu']:g} of {a['peak_tflops']:g} TFLOP/s per chip: "
      f"{e['step_s'] * 1e3:.3g} ms/step, {e['tokens_per_s_per_chip']:,.0f} tokens/s/chip"]
  if "sampler" in r:
    s = r["sampler"]
    lines.append(
        f"MDLM sampler (B x G = {s['batch']} x {s['num_samples']}, {s['steps']} steps"
        + (f" per block of {s['block_size']}" if s.get("kv_cache_blocks") else "") + ", context "
        f"{s['context_len']}, canvas {s['target_len']}), per device:")
    lines.append(f"  does NOT fit: {s['error']}" if "error" in s else
                 f"  arguments {gib(s['argument_bytes'])} | temporaries {gib(s['temp_bytes'])} | "
                 f"peak {gib(s['peak_bytes'])} | XLA FLOPs {s['flops']:.3g} per call")
  return "\n".join(lines)
