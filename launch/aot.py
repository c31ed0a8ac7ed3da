r"""Ahead-of-time compile of a config's train step and MDLM sampler: memory and speed per chip.

  python -m launch.aot --config=configs/base_1b.py --mesh=1,8,1 --devices=8 \
      [--vocab_size=32000] [--topology=v5e:2x4] [--mfu=0.4 --peak_tflops=197 --hbm_gib=16] \
      [--out=aot.json] [--config.model.remat=dots_no_batch]

Nothing is allocated: params, optimizer state and batches are abstract
(mdlm_wm/aot.py). `--devices=N` simulates N CPU devices (jax_num_cpu_devices,
set before any device is touched; XLA_FLAGS=--xla_force_host_platform_device_count=N
in the environment does the same). `--topology` compiles for compile-only
TPU devices instead (needs libtpu: `pip install "jax[tpu]"`, no TPU).
"""

import json

import jax
from absl import app, flags
from ml_collections import config_flags

from mdlm_wm import aot
from mdlm_wm.utils import errors

FLAGS = flags.FLAGS
_CONFIG = config_flags.DEFINE_config_file("config", None, "Experiment config file.")
flags.DEFINE_list("mesh", None, "data,fsdp,tensor (-1: the rest); default config.mesh.shape.")
flags.DEFINE_integer("devices", 0, "Simulated CPU devices (0: the platform's own).")
flags.DEFINE_string("topology", "", "A TPU topology, e.g. v5e:2x4 (compile-only; needs libtpu).")
flags.DEFINE_integer("vocab_size", 0, "Vocabulary size (0: config.corpus.tokenizer_vocab).")
flags.DEFINE_float("mfu", 0.4, "Assumed model FLOPs utilization.")
flags.DEFINE_float("peak_tflops", None, "Peak TFLOP/s per chip (default: the topology's "
                   "chip, else TPU v5e's 197 bf16).")
flags.DEFINE_float("hbm_gib", None, "Memory per chip for the fit check (default: the "
                   "topology's chip, else 16).")
flags.DEFINE_bool("sampler", True, "Also compile the MDLM sampler at the config's settings.")
flags.DEFINE_integer("sample_batch", 8, "Prompts per sampler call (B).")
flags.DEFINE_string("out", "", "Optional JSON output file.")
flags.mark_flag_as_required("config")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  if FLAGS.devices:
    jax.config.update("jax_num_cpu_devices", FLAGS.devices)
  mesh = [int(x) for x in FLAGS.mesh] if FLAGS.mesh else None
  with errors.reported():
    report = aot.analyze(_CONFIG.value, mesh, vocab_size=FLAGS.vocab_size,
                         topology=FLAGS.topology, num_devices=FLAGS.devices or 0,
                         mfu=FLAGS.mfu, peak_tflops=FLAGS.peak_tflops, hbm_gib=FLAGS.hbm_gib,
                         sampler=FLAGS.sampler,
                         sample_batch=FLAGS.sample_batch)
  print(aot.format_report(report))
  if FLAGS.out:
    with open(FLAGS.out, "w") as f:
      json.dump(report, f, indent=2)


if __name__ == "__main__":
  app.run(main, flags_parser=errors.parse_flags)
