"""The terminal progress line shows the metrics it is configured for."""

import io

from mdlm_wm.train.metrics import StepProgress


def test_progress_shows_only_its_keys():
  out = io.StringIO()
  StepProgress(10, stream=out).update(5, {"loss": 1.5, "kl": 0.25}, force=True)
  StepProgress(10, stream=out, keys=("kl",)).update(5, {"loss": 1.5, "kl": 0.25}, force=True)
  first, second = out.getvalue().splitlines()
  assert first.startswith("step 5/10 loss 1.5 eta") and "kl" not in first
  assert second.startswith("step 5/10 kl 0.25 eta") and "loss" not in second
