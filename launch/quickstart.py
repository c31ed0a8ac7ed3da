r"""The main job on the built-in default data.

  python -m launch.quickstart --workdir=/tmp/mdlm_wm_quickstart \
      [--config=configs/quickstart.py] [--config.train.steps=300]

Builds the default corpus, trains the quickstart MDLM and AR world models,
predicts next states for test transitions and prints a side-by-side table
plus example predictions. Finished stages are reused when rerun.
"""

import os

from absl import app, flags
from ml_collections import config_flags

from mdlm_wm import config as config_lib
from mdlm_wm import quickstart
from mdlm_wm.utils import errors

FLAGS = flags.FLAGS
_CONFIG = config_flags.DEFINE_config_file(
    "config", os.path.join(os.path.dirname(__file__), "..", "configs", "quickstart.py"),
    "Experiment config (ml_collections get_config file).")
flags.DEFINE_string("workdir", "/tmp/mdlm_wm_quickstart", "Where outputs go.")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  with errors.reported():
    config_lib.validate(_CONFIG.value)
  quickstart.run(_CONFIG.value, FLAGS.workdir)


if __name__ == "__main__":
  app.run(main, flags_parser=errors.parse_flags)
