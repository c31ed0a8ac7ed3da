r"""World-model GRPO from a supervised checkpoint; resumes when WORKDIR has one.

  python -m launch.grpo --config=configs/grpo_wm.py --init=/tmp/mdlm_wm_quickstart/mdlm \
      --workdir=/tmp/grpo_mdlm \
      --config.data.eval=/tmp/mdlm_wm_quickstart/data/test.jsonl

Writes WORKDIR/metrics.jsonl (reward, pass rate, KL, clip fraction, timing
per step), WORKDIR/eval/<split>.step<N>.json (the eval suite's report at step
0, every train.eval_every steps and at the end) and world-model checkpoints
that `launch.evaluate --workdir=WORKDIR` reads.
"""

from absl import app, flags
from ml_collections import config_flags

from mdlm_wm.utils import errors

FLAGS = flags.FLAGS
_CONFIG = config_flags.DEFINE_config_file("config", None, "GRPO config file.", lock_config=True)
flags.DEFINE_string("init", None, "Supervised workdir to start from (sets config.init).")
flags.DEFINE_string("workdir", None, "Checkpoints, metrics.jsonl and eval reports go here.",
                    required=True)
flags.mark_flag_as_required("config")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  from mdlm_wm.rl import wm_grpo  # pylint: disable=import-outside-toplevel
  cfg = _CONFIG.value
  if FLAGS.init:
    with cfg.unlocked():
      cfg.init = FLAGS.init
  with errors.reported():
    result = wm_grpo.run(cfg, FLAGS.workdir)
  print(result.summary())


if __name__ == "__main__":
  app.run(main, flags_parser=errors.parse_flags)
