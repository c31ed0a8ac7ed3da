"""Launchers report bad input in two lines and exit 2; real bugs keep their traceback."""

import os
import subprocess
import sys

import pytest

from mdlm_wm.utils import errors

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _raise(error):
  raise error


def test_input_error_is_two_lines_and_exit_2(capsys, monkeypatch):
  monkeypatch.delenv(errors.TRACEBACK_ENV, raising=False)
  with pytest.raises(SystemExit) as exit_info, errors.reported():
    _raise(ValueError("config.data.seq_len: must be >= 1"))
  assert exit_info.value.code == 2
  lines = capsys.readouterr().err.splitlines()
  assert lines[0] == "error: config.data.seq_len: must be >= 1"
  line = _raise.__code__.co_firstlineno + 1
  assert lines[1].startswith(f"  raised at tests/test_errors.py:{line} in _raise (ValueError;")
  assert len(lines) == 2


def test_key_error_message_is_not_quoted(capsys, monkeypatch):
  monkeypatch.delenv(errors.TRACEBACK_ENV, raising=False)
  with pytest.raises(SystemExit), errors.reported():
    _raise(KeyError("unknown environment 'kitchen'"))
  assert capsys.readouterr().err.startswith("error: unknown environment 'kitchen'\n")


def test_traceback_env_and_other_exceptions_propagate(monkeypatch):
  monkeypatch.setenv(errors.TRACEBACK_ENV, "1")
  with pytest.raises(ValueError, match="bad"), errors.reported():
    _raise(ValueError("bad"))
  monkeypatch.delenv(errors.TRACEBACK_ENV)
  with pytest.raises(RuntimeError), errors.reported():
    _raise(RuntimeError("a bug, not bad input"))


def test_launcher_names_the_bad_key_without_its_usage_text():
  env = {k: v for k, v in os.environ.items() if k != errors.TRACEBACK_ENV}
  res = subprocess.run(
      [sys.executable, "-m", "launch.train", "--config=configs/tiny.py", "--workdir=/nonexistent",
       "--config.data.batch_size=0"], cwd=ROOT, env=env, capture_output=True, text=True,
      timeout=300)
  assert res.returncode == 2, res.stderr[-2000:]
  assert "error: config.data.batch_size: must be >= 1\n  raised at mdlm_wm/config.py:" in res.stderr
  assert "--workdir:" not in res.stderr  # absl's flag help


@pytest.mark.parametrize("args,expected", [
    (["--config=configs/grpo_wm.py", "--config.trian.steps=2"],
     "error: --config.trian.steps: the config has no key 'trian' Did you mean \"train\""),
    (["--config=configs/no_such_config.py"],
     "error: --config=configs/no_such_config.py: cannot load it ([Errno 2] No such file"),
])
def test_a_bad_config_flag_is_one_line_naming_it(args, expected):
  env = {k: v for k, v in os.environ.items() if k != errors.TRACEBACK_ENV}
  res = subprocess.run([sys.executable, "-m", "launch.grpo", "--workdir=/nonexistent", *args],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
  assert res.returncode == 2, res.stderr[-2000:]
  assert res.stderr.startswith(expected) and len(res.stderr.splitlines()) == 1, res.stderr


def test_a_tokenizer_too_small_for_the_corpus_is_reported_not_a_traceback(tmp_path):
  env = {k: v for k, v in os.environ.items() if k != errors.TRACEBACK_ENV}
  res = subprocess.run(
      [sys.executable, "-m", "launch.build_corpus", "--envs=shop", "--episodes_per_env=3",
       f"--out_dir={tmp_path}", "--tokenizer_vocab=280"], cwd=ROOT, env=env,
      capture_output=True, text=True, timeout=300)
  assert res.returncode == 2, res.stderr[-2000:]
  assert "error: cannot train a 280-piece tokenizer" in res.stderr
  assert "Traceback" not in res.stderr
