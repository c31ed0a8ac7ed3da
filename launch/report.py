r"""Renders several evaluation reports side by side.

  python -m launch.report --reports=mdlm.json,ar.json,ar4x.json --out=docs/results_run

Writes DIR/results.md (a Markdown table with 95% intervals) and PNG plots:
pass rate by model size, pass rate by rollout horizon, and quality/latency
by number of denoising steps (when reports at several step counts are given).
"""

import json
import os

from absl import app, flags

from mdlm_wm.eval import report as report_lib
from mdlm_wm.utils import errors

FLAGS = flags.FLAGS
flags.DEFINE_list("reports", None, "Report JSON files from launch.evaluate.", required=True)
flags.DEFINE_list("names", None, "Column names (default: the file names).")
flags.DEFINE_string("out", None, "Output directory.", required=True)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  names = FLAGS.names or [os.path.splitext(os.path.basename(p))[0] for p in FLAGS.reports]
  if len(names) != len(FLAGS.reports):
    raise app.UsageError("--names needs one name per report")
  reports = []
  with errors.reported():
    for path in FLAGS.reports:
      with open(path) as f:
        reports.append(json.load(f))
  os.makedirs(FLAGS.out, exist_ok=True)
  table = report_lib.markdown_table(reports, names)
  plots = report_lib.plot_all(reports, names, FLAGS.out)
  with open(os.path.join(FLAGS.out, "results.md"), "w") as f:
    f.write(table + "\n\n" + "\n".join(f"![{os.path.basename(p)}]({os.path.basename(p)})"
                                       for p in plots) + "\n")
  print(table)
  print(f"wrote {FLAGS.out}/results.md and {len(plots)} plot(s)")


if __name__ == "__main__":
  app.run(main)
