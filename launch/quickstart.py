r"""The main job on the built-in default data.

  python -m launch.quickstart [--workdir=/tmp/mdlm_wm_quickstart] \
      [--config=configs/quickstart.py] [--config.corpus.episodes_per_env=60]

Builds the default corpus (every built-in environment) with its tokenizer
into WORKDIR/data and prints its statistics. Training, sampling and the
report join this job when the model lands.
"""

import os

from absl import app, flags
from ml_collections import config_flags

from mdlm_wm.data import corpus

FLAGS = flags.FLAGS
_CONFIG = config_flags.DEFINE_config_file(
    "config", os.path.join(os.path.dirname(__file__), "..", "configs", "quickstart.py"),
    "Experiment config (ml_collections get_config file).")
flags.DEFINE_string("workdir", "/tmp/mdlm_wm_quickstart", "Where outputs go.")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  cfg = corpus.CorpusConfig.from_config(_CONFIG.value.corpus)
  try:
    cfg.validate()
  except ValueError as e:
    raise app.UsageError(f"--config.corpus: {e}") from None
  out_dir = os.path.join(FLAGS.workdir, "data")
  result = corpus.build_corpus(cfg, out_dir)
  print(corpus.format_summary(result))
  print(f"\ncorpus, tokenizer and stats.json in {out_dir}")


if __name__ == "__main__":
  app.run(main)
