r"""Validates trajectory JSONL files and prints per-environment statistics.

  python -m launch.check_data FILE [FILE...] [--tokenizer=tokenizer.model]
      [--config=configs/study/ar_s.py [--config.data.max_context_len=512]]

With --config (and --tokenizer), also prints what that config's context
lengths and truncation policy cut, per environment, and the share of
examples whose five anchors (s0, task, tools, rules, steer) are whole.

Exits 0 and prints counts when every file is valid; exits 1 and prints every
problem (file:line: key: message, up to 20 per file) otherwise; exits 2 when
the --tokenizer cannot be loaded. Never writes.
"""

import itertools
import sys

from absl import app, flags
from ml_collections import config_flags

from mdlm_wm import config as config_lib
from mdlm_wm.data import schema, stats as stats_lib
from mdlm_wm.data.tokenizer import Tokenizer
from mdlm_wm.utils import errors as errors_lib

FLAGS = flags.FLAGS
flags.DEFINE_string("tokenizer", None, "Optional SentencePiece model: adds token counts.")
_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "Optional experiment config: adds its truncation counts (needs --tokenizer).",
    lock_config=True)


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
  cfg = _CONFIG.value
  if cfg is not None and not FLAGS.tokenizer:
    raise app.UsageError("--config needs --tokenizer (truncation is counted in tokens)")
  with errors_lib.reported():
    tokenizer = Tokenizer.load(FLAGS.tokenizer) if FLAGS.tokenizer else None
    if cfg is not None:
      config_lib.validate(cfg)
  totals, errors = check_files(paths, tokenizer)
  if errors:
    print("\n".join(errors), file=sys.stderr)
    print(f"INVALID: {len(errors)} problem(s) in {len(paths)} file(s)", file=sys.stderr)
    return 1
  print(stats_lib.format_table(totals, tokenizer is not None))
  if cfg is not None:
    d = cfg.data
    episodes = itertools.chain.from_iterable(schema.iter_episodes(p) for p in paths)
    table = stats_lib.truncation_by_env(episodes, config_lib.serializer(cfg, tokenizer))
    print(f"\ntruncation at max_context_len {d.max_context_len}, max_target_len "
          f"{d.max_target_len}, history_len {d.history_len}, tools {config_lib.tools_format(cfg)}"
          f", ablated {list(config_lib.ablated(cfg))}:")
    print(stats_lib.format_truncation(table))
  print(f"OK: {len(paths)} file(s)")
  return 0


if __name__ == "__main__":
  app.run(main)
