"""Launchers keep library INFO logs out of their output unless --verbosity asks."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A launcher in miniature: `python -m launch.X` imports the launch package first.
PROBE = ("import launch\n"
         "from absl import app, logging\n"
         "app.run(lambda argv: (logging.info('INFO-LINE'), logging.warning('WARN-LINE')) and None)\n")


@pytest.mark.parametrize("flags,info_shown", [([], False), (["--verbosity=0"], True),
                                              (["-v", "1"], True)])
def test_info_logs_need_verbosity_and_warnings_always_show(flags, info_shown):
  res = subprocess.run([sys.executable, "-c", PROBE, *flags], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
  assert res.returncode == 0, res.stderr
  assert "WARN-LINE" in res.stderr
  assert ("INFO-LINE" in res.stderr) == info_shown, res.stderr
