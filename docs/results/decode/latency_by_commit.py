"""Decoding latency of whatever `mdlm_wm` is importable: the AR KV decoder and
the block sampler at blocks of 2, 4 and 8, one token a step, in both commit
orders, at the quickstart's shapes (launch.bench's synthetic model and
context, B x G = 8 x 4, 256 tokens written). Run from a checkout of each
commit to split a speed-up by commit (launch.bench of older commits cannot
choose the commit order):

  git worktree add /tmp/at_REV REV && cd /tmp/at_REV && \\
      PYTHONPATH=. python /path/to/latency_by_commit.py

Prints one JSON line: ms per call (mean of 3 after a warm-up call).
"""
import json
import sys

import jax
import numpy as np

sys.argv = sys.argv[:1] + ["--configs=quickstart"]
from absl import flags  # noqa: E402

from launch import bench  # noqa: E402  (its flags, model sizes and token ids)
from mdlm_wm import config as config_lib  # noqa: E402
from mdlm_wm.ar import decode as ar_decode  # noqa: E402
from mdlm_wm.diffusion import block_sampler  # noqa: E402
from mdlm_wm.model import sharding  # noqa: E402
from mdlm_wm.train import state as train_state  # noqa: E402

flags.FLAGS(sys.argv)
cfg = bench.load_config("quickstart")
B, G, V = 8, 4, 4096
C, T = cfg.data.max_context_len, cfg.data.max_target_len
rng = np.random.default_rng(1)
context = rng.integers(13, V, (B, C)).astype(np.int32)
context[:, -1] = bench.TARGET_MARKER
valid, fixed = np.ones((B, C), bool), np.full((B, T), -1, np.int32)
mesh = sharding.make_mesh((1, 1, 1), jax.devices()[:1])
out = {}
for attention in ("causal", "bidirectional"):
  c = cfg.copy_and_resolve_references()
  c.model.attention, c.objective = attention, "ar" if attention == "causal" else "mdlm"
  g, p = train_state.create_model(config_lib.model_config(c, V), mesh,
                                  sharding.rules_dict(cfg.mesh.rules), 0)
  if attention == "causal":
    d = ar_decode.DecodeConfig(max_len=T, temperature=1.0)
    out["ar"] = bench._timed(lambda i: ar_decode.decode(
        g, p, context, valid, jax.random.key(i), d, num_samples=G), 3)[1]
    continue
  for order in ("left_to_right", "top1"):
    for b in (2, 4, 8):
      bc = block_sampler.BlockSamplerConfig(block_size=b, steps=b, shift=True, causal_clean=True,
                                            confidence=order)
      out[f"b{b}_{order}"] = bench._timed(lambda i: block_sampler.sample(
          g, p, context, valid, fixed, jax.random.key(i), bc, num_samples=G,
          mask_id=bench.MASK_ID, eot_id=bench.EOT_ID)[0], 3)[1]
print(json.dumps({k: round(v) for k, v in out.items()}))
