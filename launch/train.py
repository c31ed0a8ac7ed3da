r"""Trains an MDLM or AR world model; resumes when WORKDIR has a checkpoint.

  python -m launch.train --config=configs/quickstart.py --workdir=/tmp/wm \
      --config.objective=mdlm --config.data.train=/tmp/corpus/train.jsonl \
      --config.data.valid=/tmp/corpus/valid.jsonl \
      --config.data.tokenizer=/tmp/corpus/tokenizer.model
"""

from absl import app, flags
from ml_collections import config_flags

from mdlm_wm.train.trainer import train

FLAGS = flags.FLAGS
_CONFIG = config_flags.DEFINE_config_file("config", None, "Experiment config file.",
                                          lock_config=True)
flags.DEFINE_string("workdir", None, "Checkpoints, metrics.jsonl and TensorBoard go here.",
                    required=True)
flags.mark_flag_as_required("config")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  try:
    result = train(_CONFIG.value, FLAGS.workdir)
  except ValueError as e:
    raise app.UsageError(str(e)) from None
  print(f"done: step {result.step}, loss {result.loss:.4f}, valid loss {result.valid_loss}, "
        f"{result.tokens_per_sec:.0f} tokens/s")


if __name__ == "__main__":
  app.run(main)
