"""Short reports of bad input for the launchers.

absl's `app.UsageError` prints a launcher's whole usage and flag help before
the message, and turning every ValueError into one also hides the traceback
of a genuine bug. `reported` prints the message and the line that raised it
instead and exits 2; with MDLM_WM_TRACEBACK=1 the exception propagates
untouched, traceback and all.
"""

import contextlib
import os
import sys
import traceback

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
    if os.environ.get(TRACEBACK_ENV, "") not in ("", "0"):
      raise
    print(describe(e), file=sys.stderr, flush=True)
    sys.exit(2)
