"""The layering of docs/design.md holds: the import contracts in pyproject.toml
(`lint-imports`), and inference that loads no training code."""

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_LINT = ("import sys; from importlinter.cli import lint_imports; "
         "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, no_logo=True))")


def test_imports_keep_the_contracts():
  # A fresh interpreter in the repository root: the modules linted are this
  # checkout's, whatever else is installed.
  res = subprocess.run([sys.executable, "-c", _LINT], cwd=REPO, capture_output=True, text=True)
  assert res.returncode == 0, res.stdout + res.stderr
  assert "0 broken" in res.stdout


def test_world_model_loads_without_the_trainer_and_grain():
  probe = ("import sys, mdlm_wm.world_model; "
           "print('mdlm_wm.train.trainer' in sys.modules, 'grain' in sys.modules)")
  res = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True)
  assert res.returncode == 0, res.stderr
  assert res.stdout.split() == ["False", "False"]
