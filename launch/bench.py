r"""Benchmarks: train throughput and MFU, sampler latency MDLM vs AR.

  python -m launch.bench [--configs=quickstart,small] [--train_steps=10] \
      [--block_sizes=4,8] [--sampler_steps=16,32] [--out=bench.json]

Samplers timed on the same backbone: the AR KV decoder, the block-diffusion
sampler with its KV cache (per block size; `--block_steps` denoising steps
per block, 0: one per token, the slowest setting; commit order the config's
`sample.confidence` or `--confidence`), and the full-canvas
sampler with and without its prefix cache (`--sampler_steps` in all). Then
one decoding step's parts (backbone forward against a full cache, logits,
draw) by the number of slots it runs, to say where the time goes.

Everything runs on synthetic batches of the config's shapes (random tokens,
a realistic context/target split), so the numbers measure the code, not a
corpus. MFU is model FLOPs per second over a measured float32 matmul peak on
this machine, not a vendor figure.
"""

import importlib
import json
import resource
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags
from flax import nnx

from mdlm_wm import config as config_lib
from mdlm_wm.ar import decode as ar_decode
from mdlm_wm.data import block_rows
from mdlm_wm.diffusion import block_sampler
from mdlm_wm.diffusion import sampler as mdlm_sampler
from mdlm_wm.model import sampling, sharding
from mdlm_wm.train import objectives, trainer
from mdlm_wm.train import state as train_state
from mdlm_wm.utils import errors

FLAGS = flags.FLAGS
flags.DEFINE_list("configs", ["quickstart", "small"], "Config names under configs/.")
flags.DEFINE_integer("train_steps", 10, "Timed train steps after one warm-up step (0: skip).")
flags.DEFINE_list("block_sizes", ["4", "8"], "Block sizes of the block-diffusion sampler.")
flags.DEFINE_list("block_steps", ["0"],
                  "Denoising steps per block to time (0: the block size, one token a step).")
flags.DEFINE_list("sampler_steps", ["32"], "Full-canvas MDLM denoising steps to time.")
flags.DEFINE_string("confidence", "",
                    "Block sampler's commit order (empty: the config's sample.confidence).")
flags.DEFINE_integer("sample_batch", 8, "Prompts per sampler call (B).")
flags.DEFINE_integer("num_samples", 4, "Samples per prompt (G).")
flags.DEFINE_integer("repeats", 3, "Timed sampler calls per setting (after a warm-up call).")
flags.DEFINE_integer("vocab_size", 4096, "Vocabulary size of the synthetic models.")
flags.DEFINE_boolean("step_parts", True,
                     "Also time one decoding step's parts (forward, logits, draw) by width.")
flags.DEFINE_string("out", "", "Optional JSON output file.")

MASK_ID, EOT_ID, TARGET_MARKER = 2, 3, 12


def matmul_peak(n: int = 2048, repeats: int = 10) -> float:
  """Measured float32 matmul FLOP/s on the default device."""
  a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32)
  f = jax.jit(lambda x: x @ x)
  f(a).block_until_ready()
  t0 = time.perf_counter()
  for _ in range(repeats):
    out = f(a)
  out.block_until_ready()
  return 2 * n ** 3 * repeats / (time.perf_counter() - t0)


def synthetic_batch(cfg, rng: np.random.Generator) -> dict[str, np.ndarray]:
  """Rows of one example each (the longest context and target), as the
  pipeline packs them: [context][target], or block-diffusion rows."""
  B, L = cfg.data.batch_size, cfg.data.seq_len
  C, T = cfg.data.max_context_len, cfg.data.max_target_len
  ids = lambda n: rng.integers(13, FLAGS.vocab_size, n).astype(np.int32)
  b = config_lib.block_size(cfg)
  if b:
    rows = [block_rows.block_row(ids(C), ids(T), b, bool(cfg.diffusion.shift),
                                 clean_labels=config_lib.causal_clean(cfg)) for _ in range(B)]
    out = {k: np.stack([np.pad(r[k], (0, L - len(r[k]))) for r in rows])
           for k in block_rows.ROW_FEATURES}
    out["segment_ids"] = np.stack([np.pad(np.ones(len(r["tokens"]), np.int32),
                                          (0, L - len(r["tokens"]))) for r in rows])
    out["positions"] = out.pop("pos")
    return out
  tokens = ids((B, L))
  target = np.zeros((B, L), np.int32)
  target[:, C:C + T] = 1
  return {"tokens": tokens, "target_mask": target, "steer_mask": np.zeros((B, L), np.int32),
          "segment_ids": np.ones((B, L), np.int32),
          "positions": np.broadcast_to(np.arange(L), (B, L)).astype(np.int32)}


def peak_rss_mib() -> float:
  """Peak resident memory of this process so far (Linux reports KiB)."""
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bench_train(cfg, peak: float, objective: str) -> dict:
  cfg = cfg.copy_and_resolve_references()
  cfg.objective = objective
  model_cfg = config_lib.model_config(cfg, FLAGS.vocab_size)
  mesh = sharding.make_mesh(cfg.mesh.shape)
  graphdef, params = train_state.create_model(model_cfg, mesh, sharding.rules_dict(cfg.mesh.rules), 0)
  tx, _ = train_state.make_optimizer(cfg)
  with jax.set_mesh(mesh):
    state = train_state.init_train_state(params, tx)
  obj = objectives.objective_config(cfg, MASK_ID)
  step = jax.jit(trainer.make_train_step(graphdef, obj, tx), donate_argnums=(0,))
  batch = {k: jnp.asarray(v) for k, v in synthetic_batch(cfg, np.random.default_rng(0)).items()}
  t0 = time.perf_counter()
  step = step.lower(state, batch, jax.random.key(0)).compile()
  compile_s = time.perf_counter() - t0
  state, m = step(state, batch, jax.random.key(0))
  jax.block_until_ready(m)
  t0 = time.perf_counter()
  for i in range(FLAGS.train_steps):
    state, m = step(state, batch, jax.random.key(i + 1))
  jax.block_until_ready(m)
  dt = (time.perf_counter() - t0) / FLAGS.train_steps
  tokens = cfg.data.batch_size * cfg.data.seq_len
  flops = model_cfg.flops_per_token(cfg.data.seq_len) * tokens / dt
  return {"objective": objective, "params": model_cfg.num_params(), "step_ms": dt * 1e3,
          "compile_s": compile_s, "tokens_per_sec": tokens / dt, "model_tflops": flops / 1e12,
          "mfu": flops / peak, "peak_rss_mib": peak_rss_mib()}


def _timed(fn, repeats: int) -> tuple[float, float]:
  """(first call incl. compilation in s, mean later call in ms)."""
  t0 = time.perf_counter()
  jax.block_until_ready(fn(0))
  first = time.perf_counter() - t0
  t0 = time.perf_counter()
  for i in range(repeats):
    out = fn(i + 1)
  jax.block_until_ready(out)
  return first, (time.perf_counter() - t0) / repeats * 1e3


def _synthetic_model(cfg, attention: str):
  """(config, model config, graphdef, params) of a randomly initialised model
  of `cfg`'s shapes with `attention` (causal: the AR), on one device."""
  c = cfg.copy_and_resolve_references()
  c.model.attention = attention
  c.objective = "ar" if attention == "causal" else "mdlm"
  model_cfg = config_lib.model_config(c, FLAGS.vocab_size)
  mesh = sharding.make_mesh((1, 1, 1), jax.devices()[:1])
  graphdef, params = train_state.create_model(model_cfg, mesh,
                                              sharding.rules_dict(cfg.mesh.rules), 0)
  return c, model_cfg, graphdef, params


def bench_sampler(cfg) -> list[dict]:
  """Latency of one call: B prompts x G samples, the config's context and canvas."""
  B, G = FLAGS.sample_batch, FLAGS.num_samples
  C, T = cfg.data.max_context_len, cfg.data.max_target_len
  rng = np.random.default_rng(1)
  context = rng.integers(13, FLAGS.vocab_size, (B, C)).astype(np.int32)
  context[:, -1] = TARGET_MARKER
  valid = np.ones((B, C), bool)
  fixed = np.full((B, T), -1, np.int32)
  rows = []
  for attention in ("causal", "bidirectional", "prefix"):
    c, _, graphdef, params = _synthetic_model(cfg, attention)
    if attention == "causal":
      dcfg = ar_decode.DecodeConfig(max_len=T, temperature=1.0)
      first, ms = _timed(lambda i: ar_decode.decode(graphdef, params, context, valid,
                                                    jax.random.key(i), dcfg, num_samples=G),
                         FLAGS.repeats)
      rows.append({"model": "ar", "mode": "kv-cache", "block": 1, "steps": T,
                   "ms_per_call": ms, "first_call_s": first})
    elif attention == "bidirectional":
      for b in map(int, FLAGS.block_sizes):
        for per_block in sorted({int(s) or b for s in FLAGS.block_steps}):
          bcfg = block_sampler.BlockSamplerConfig(
              block_size=b, steps=per_block, shift=bool(cfg.diffusion.shift),
              causal_clean=config_lib.causal_clean(c),
              confidence=FLAGS.confidence or cfg.sample.confidence)
          first, ms = _timed(lambda i, bcfg=bcfg: block_sampler.sample(
              graphdef, params, context, valid, fixed, jax.random.key(i), bcfg,
              num_samples=G, mask_id=MASK_ID, eot_id=EOT_ID)[0], FLAGS.repeats)
          rows.append({"model": "mdlm", "mode": "block kv-cache", "block": b,
                       "steps": per_block * -(-T // b), "confidence": bcfg.confidence,
                       "ms_per_call": ms, "first_call_s": first})
    else:
      for steps in map(int, FLAGS.sampler_steps):
        for cache in (False, True):
          scfg = mdlm_sampler.SamplerConfig(steps=steps, use_prefix_cache=cache)
          first, ms = _timed(lambda i, scfg=scfg: mdlm_sampler.sample(
              graphdef, params, context, valid, fixed, jax.random.key(i), scfg, num_samples=G,
              mask_id=MASK_ID).tokens_BGT, FLAGS.repeats)
          rows.append({"model": "mdlm", "mode": "full canvas" + (", prefix cache" if cache
                                                                 else ""),
                       "block": T, "steps": steps, "ms_per_call": ms, "first_call_s": first})
  ar_ms = next(r["ms_per_call"] for r in rows if r["model"] == "ar")
  for r in rows:
    r.update(batch=B, samples=G, context_len=C, target_len=T,
             next_states_per_sec=B * G / (r["ms_per_call"] / 1e3),
             latency_vs_ar=r["ms_per_call"] / ar_ms, peak_rss_mib=peak_rss_mib())
  return rows


def bench_step_parts(cfg) -> list[dict]:
  """Where a decoding step's time goes, by the number of slots it runs: the
  backbone forward of w slots against a full cache, the logits of w slots,
  one draw per slot. The AR's step is width 1 throughout; a block step is
  width b in the forward (2b at a block's first step, which also writes the
  block before it) and, committing one token left to right, width 1 after."""
  N = FLAGS.sample_batch * FLAGS.num_samples
  _, model_cfg, graphdef, params = _synthetic_model(cfg, "bidirectional")
  L = cfg.data.max_context_len - 1 + cfg.data.max_target_len
  shape = (N, L, model_cfg.n_kv_heads, model_cfg.head_dim)
  cache = [(jnp.zeros(shape), jnp.zeros(shape)) for _ in range(model_cfg.n_layers)]
  widths = sorted({1} | {m * int(b) for b in FLAGS.block_sizes for m in (1, 2)})
  rows = []
  for w in widths:
    @jax.jit
    def forward(params, tokens, cache):
      model = nnx.merge(graphdef, params)
      x = model.embed(tokens)
      positions = jnp.broadcast_to(L + jnp.arange(w), (N, w))
      mask = jnp.ones((N, w, L + w), bool)
      for block, kv in zip(model.blocks, cache):
        x, _ = block(x, positions, mask, kv)
      return x
    head = jax.jit(lambda params, x: nnx.merge(graphdef, params).logits(x))
    draw = jax.jit(lambda key, logits: sampling.sample_tokens(key, logits, 1.0, 1.0))
    x = forward(params, jnp.ones((N, w), jnp.int32), cache)
    logits = head(params, x)
    rows.append({"slots": w, "rows": N, "cache_len": L,
                 "forward_ms": _timed(lambda i: forward(params, jnp.full((N, w), i), cache),
                                      10 * FLAGS.repeats)[1],
                 "logits_ms": _timed(lambda i: head(params, x + i), 10 * FLAGS.repeats)[1],
                 "draw_ms": _timed(lambda i: draw(jax.random.key(i), logits),
                                   10 * FLAGS.repeats)[1]})
  return rows


def load_config(name: str):
  """configs/NAME.py's config; a ValueError naming the flag when there is none."""
  try:
    module = importlib.import_module(f"configs.{name}")
  except ModuleNotFoundError as e:
    if e.name != f"configs.{name}":  # the config itself imports something missing
      raise
    raise ValueError(f"--configs: no config {name!r} (expected configs/{name}.py)") from None
  return module.get_config()


def main(argv):
  del argv
  # Every name is checked before the minutes of measuring start.
  with errors.reported():
    configs = {name: load_config(name) for name in FLAGS.configs}
  peak = matmul_peak()
  print(f"device: {jax.devices()[0].device_kind} x{jax.device_count()} | measured float32 "
        f"matmul peak {peak / 1e9:.1f} GFLOP/s")
  results = {"matmul_peak_flops": peak, "device": jax.devices()[0].device_kind, "configs": {}}
  for name, cfg in configs.items():
    train_rows = [bench_train(cfg, peak, obj) for obj in ("mdlm", "ar")] if FLAGS.train_steps else []
    for r in train_rows:
      print(f"\n[{name}] train {r['objective']}: {r['params']:,} params, {r['step_ms']:.0f} "
            f"ms/step (compile {r['compile_s']:.1f}s), {r['tokens_per_sec']:.0f} tokens/s, "
            f"MFU {100 * r['mfu']:.1f}%, peak RSS {r['peak_rss_mib']:.0f} MiB")
    sample_rows = bench_sampler(cfg)
    print(f"[{name}] sampler, B x G = {FLAGS.sample_batch} x {FLAGS.num_samples}, context "
          f"{cfg.data.max_context_len}, target {cfg.data.max_target_len}:")
    print("| model | mode | block | steps | ms/call | next states/s | latency / AR | "
          "first call s |\n|---|---|---|---|---|---|---|---|")
    for r in sample_rows:
      mode = r["mode"] + (f", {r['confidence']}" if "confidence" in r else "")
      print(f"| {r['model']} | {mode} | {r['block']} | {r['steps']} | "
            f"{r['ms_per_call']:.0f} | "
            f"{r['next_states_per_sec']:.1f} | {r['latency_vs_ar']:.2f} | "
            f"{r['first_call_s']:.1f} |")
    parts = bench_step_parts(cfg) if FLAGS.step_parts else []
    if parts:
      print(f"[{name}] one decoding step's parts, {parts[0]['rows']} rows, cache of "
            f"{parts[0]['cache_len']} (ms):\n| slots | forward | logits | draw |\n"
            "|---|---|---|---|")
      for r in parts:
        print(f"| {r['slots']} | {r['forward_ms']:.2f} | {r['logits_ms']:.2f} | "
              f"{r['draw_ms']:.2f} |")
    print(f"peak RSS {peak_rss_mib():.0f} MiB")
    results["configs"][name] = {"train": train_rows, "sampler": sample_rows,
                                "step_parts": parts}
  if FLAGS.out:
    with open(FLAGS.out, "w") as f:
      json.dump(results, f, indent=2)


if __name__ == "__main__":
  app.run(main)
