"""Short reports of bad input for the launchers.

absl's `app.UsageError` prints a launcher's whole usage and flag help before
the message, and turning every ValueError into one also hides the traceback
of a genuine bug. `reported` prints the message and the line that raised it
instead and exits 2; with MDLM_WM_TRACEBACK=1 the exception propagates
untouched, traceback and all. `parse_flags` does the same for the config
flag of a launcher (`app.run(main, flags_parser=errors.parse_flags)`): an
override of a key the config lacks, or a config file that does not load.
"""

import contextlib
import os
import sys
import traceback

from absl import app, flags
from ml_collections import config_flags

TRACEBACK_ENV = "MDLM_WM_TRACEBACK"
# What bad input raises here: a config key or data record that fails
# validation (ValueError, SchemaError), a missing file, an unknown name.
INPUT_ERRORS = (ValueError, KeyError, FileNotFoundError)

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _short(path: str) -> str:
  path = os.path.abspath(path)
  return os.path.relpath(path, _ROOT) if path.startswith(_ROOT + os.sep) else path


def describe(error: BaseException) -> str:
  """'error: MESSAGE' and, when known, where it was raised (two lines)."""
  # KeyError's str() is the repr of its key; its message reads better bare.
  msg = error.args[0] if isinstance(error, KeyError) and error.args else error
  text = f"error: {msg}"
  frames = traceback.extract_tb(error.__traceback__)
  if frames:
    f = frames[-1]
    text += (f"\n  raised at {_short(f.filename)}:{f.lineno} in {f.name} "
             f"({type(error).__name__}; {TRACEBACK_ENV}=1 shows the traceback)")
  return text


@contextlib.contextmanager
def reported(kinds=INPUT_ERRORS):
  """Ends the process with `describe(e)` on stderr and exit status 2 for `kinds`."""
  try:
    yield
  except kinds as e:
    if _traceback_wanted():
      raise
    print(describe(e), file=sys.stderr, flush=True)
    sys.exit(2)


def _traceback_wanted() -> bool:
  return os.environ.get(TRACEBACK_ENV, "") not in ("", "0")


def _override_that_raised(error: BaseException) -> str | None:
  """`FLAG.KEY.PATH` of the config override whose parsing raised `error`:
  the flag is a frame's `self`, the path a local of ml_collections as it
  reads its overrides (`field_path` or `override`). None otherwise (a bug in
  a config file keeps its traceback)."""
  flag, path, tb = None, None, error.__traceback__
  while tb is not None:
    local = tb.tb_frame.f_locals
    if flag is None and isinstance(local.get("self"), flags.Flag):
      flag = local["self"].name
    if flag is not None and path is None:
      path = next((local[k] for k in ("field_path", "override") if isinstance(local.get(k), str)),
                  None)
    tb = tb.tb_next
  return None if path is None else f"{flag}.{path}"


def _key_message(error: BaseException) -> str:
  """One line for an override ml_collections could not apply."""
  while error is not None and not isinstance(error, KeyError):
    error = error.__context__
  if error is None:
    return "not a key path of the config"
  # ConfigDict's KeyError: the quoted key, then maybe a "Did you mean" line.
  return "the config has no key " + " ".join(str(error.args[0]).split())


def parse_flags(argv: list[str]) -> list[str]:
  """absl's flag parsing, but a bad `--config.KEY=VALUE` or an unloadable
  `--config` file ends the process with `error: --FLAG: MESSAGE` on stderr
  and exit status 2 (absl's own flag errors keep their two lines)."""
  try:
    rest = app.parse_flags_with_usage(argv)
  except (AttributeError, KeyError, TypeError) as e:
    name = _override_that_raised(e)
    if name is None or _traceback_wanted():
      raise
    print(f"error: --{name}: {_key_message(e)}", file=sys.stderr, flush=True)
    sys.exit(2)
  for name in list(flags.FLAGS):
    flag = flags.FLAGS[name]
    try:
      # A config file that failed to load is a stand-in that raises OSError on any use.
      getattr(flag.value, "keys", None)
    except OSError as e:
      if _traceback_wanted():
        raise
      cause = str(e.__cause__ or e).strip().splitlines()[-1].strip()
      print(f"error: --{name}={config_flags.get_config_filename(flag)}: cannot load it "
            f"({cause})", file=sys.stderr, flush=True)
      sys.exit(2)
  return rest
