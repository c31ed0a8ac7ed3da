r"""Validates trajectory JSONL files and prints per-environment statistics.

  python -m launch.check_data FILE [FILE...] [--tokenizer=tokenizer.model]

Exits 0 and prints counts when every file is valid; exits 1 and prints every
problem (file:line: key: message, up to 20 per file) otherwise; exits 2 when
the --tokenizer cannot be loaded. Never writes.
"""

import sys

from absl import app, flags

from mdlm_wm.data import schema, stats as stats_lib
from mdlm_wm.data.tokenizer import Tokenizer
from mdlm_wm.utils import errors as errors_lib

FLAGS = flags.FLAGS
flags.DEFINE_string("tokenizer", None, "Optional SentencePiece model: adds token counts.")


def check_files(paths, tokenizer=None):
  """Returns (per-env stats over the valid files, list of error lines)."""
  totals: dict[str, stats_lib.EnvStats] = {}
  errors: list[str] = []
  for path in paths:
    try:
      # Collect per file so one bad file does not hide another's statistics.
      stats_lib.merge(totals, stats_lib.collect(schema.iter_episodes(path), tokenizer))
    except schema.SchemaError as e:
      errors += e.errors
      if e.truncated:
        errors.append(f"{path}: stopped after {len(e.errors)} errors")
  return totals, errors


def main(argv):
  paths = argv[1:]
  if not paths:
    raise app.UsageError("give one or more JSONL files")
  with errors_lib.reported():
    tokenizer = Tokenizer.load(FLAGS.tokenizer) if FLAGS.tokenizer else None
  totals, errors = check_files(paths, tokenizer)
  if errors:
    print("\n".join(errors), file=sys.stderr)
    print(f"INVALID: {len(errors)} problem(s) in {len(paths)} file(s)", file=sys.stderr)
    return 1
  print(stats_lib.format_table(totals, tokenizer is not None))
  print(f"OK: {len(paths)} file(s)")
  return 0


if __name__ == "__main__":
  app.run(main)
