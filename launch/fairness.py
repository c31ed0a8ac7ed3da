r"""Are the state checks fair? Revealed share, twin ceiling and copy floor per environment.

  python -m launch.fairness --data=CORPUS/test.jsonl [--out=fairness.json]

Built-in environments only (the twin replays each episode from its seed).
The twin's pass must be ~1.0 in every environment: a check it fails asks
for information the world model could not have.
"""

import json

from absl import app, flags

from mdlm_wm.eval import fairness
from mdlm_wm.utils import errors

FLAGS = flags.FLAGS
flags.DEFINE_string("data", None, "A corpus split (JSONL) of built-in environments.")
flags.DEFINE_integer("max_episodes", 0, "Score at most this many episodes (0: all).")
flags.DEFINE_string("out", "", "Optional JSON output file.")
flags.mark_flag_as_required("data")


def main(argv):
  del argv
  with errors.reported():
    table = fairness.fairness(FLAGS.data, FLAGS.max_episodes)
  print(fairness.format_table(table))
  if FLAGS.out:
    with open(FLAGS.out, "w") as f:
      json.dump(table, f, indent=2)


if __name__ == "__main__":
  app.run(main)
