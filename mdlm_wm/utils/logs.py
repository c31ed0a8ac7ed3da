"""Library logs stay out of a launcher's output unless asked for.

absl's `app.run` sends the root logger to stderr at INFO, and orbax, absl,
jax and py4j log through it: a training run printed about 60 orbax lines per
checkpoint between its own progress lines. Every `python -m launch.X`
imports the `launch` package first, which calls `quiet_by_default()`, so
absl's `--verbosity` flag defaults to WARNING: warnings and errors always
show, library INFO logs with `--verbosity=0` and DEBUG ones too with
`--verbosity=1`. The launchers print their own progress and results.
"""

from absl import flags
from absl import logging

DEFAULT_VERBOSITY = logging.WARNING  # absl's scale: -1 WARNING, 0 INFO, 1 DEBUG


def quiet_by_default() -> None:
  """Sets absl's --verbosity to WARNING before the flags are parsed (a value
  on the command line still wins). Not `set_default`: `app.run` raises a
  verbosity left at its default to INFO."""
  flags.FLAGS.verbosity = DEFAULT_VERBOSITY
