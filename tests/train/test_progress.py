"""The terminal progress line and the tokens/s meter."""

import io

import pytest

from mdlm_wm.train.metrics import StepProgress, Throughput


def test_progress_shows_only_its_keys():
  out = io.StringIO()
  StepProgress(10, stream=out).update(5, {"loss": 1.5, "kl": 0.25}, force=True)
  StepProgress(10, stream=out, keys=("kl",)).update(5, {"loss": 1.5, "kl": 0.25}, force=True)
  first, second = out.getvalue().splitlines()
  assert first.startswith("step 5/10 loss 1.5 eta") and "kl" not in first
  assert second.startswith("step 5/10 kl 0.25 eta") and "loss" not in second


def test_throughput_counts_finished_tokens_and_leaves_out_paused_time():
  now = [0.0]
  meter = Throughput(clock=lambda: now[0])
  meter.add(100)
  now[0] = 2.0
  with meter.paused():  # an evaluation: 5 s that are not training
    now[0] = 7.0
  meter.add(100)
  now[0] = 8.0
  assert meter.rate() == pytest.approx(200 / 3)
  now[0] = 12.0
  meter.add(40)
  assert meter.rate() == pytest.approx(10.0)  # the window restarted at the last rate()
