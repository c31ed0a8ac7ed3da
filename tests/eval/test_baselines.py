"""The copy-s_t floor and the twin-world ceiling, on a fake env with hidden draws."""

import pytest

from mdlm_wm.data import schema
from mdlm_wm.data.serialize import transitions
from mdlm_wm.envs.score import score_prediction
from mdlm_wm.eval import baselines
from mdlm_wm.eval import evaluate as ev
from tests.conftest import episode_dict
from tests.envs import fake_env


@pytest.fixture
def episodes(monkeypatch):
  fake_env.register(monkeypatch)
  return [fake_env.episode(seed) for seed in range(12)]


def _examples(episodes):
  return [ev.Example(ep, k, tr) for ep in episodes for k, tr in enumerate(transitions(ep, 0))]


def test_copy_predicts_the_current_state(episodes):
  pairs = [(ep, k) for ep in episodes for k in range(len(ep.steps))]
  assert baselines.copy_predictions(pairs) == [ep.steps[k].state for ep, k in pairs]


def test_twin_passes_every_transition_and_redraws_hidden_content(episodes):
  pairs = [(ep, k) for ep in episodes for k in range(len(ep.steps))]
  predicted, skipped = baselines.twin_predictions(pairs)
  assert skipped == {} and None not in predicted
  scores = [score_prediction(ep.env, ep.spec, ep.steps[k], p)
            for (ep, k), p in zip(pairs, predicted)]
  assert all(s["pass"] == 1.0 for s in scores)
  # Some first openings draw another content in the twin: only pass_all sees it.
  redrawn = [s for (ep, k), p, s in zip(pairs, predicted, scores) if p != ep.steps[k].next_state]
  assert redrawn and all(s["pass_all"] == 0.0 for s in redrawn)


def test_twin_skips_and_counts_what_it_cannot_rebuild(episodes, write_jsonl):
  toy = schema.load_episodes(write_jsonl([episode_dict(0, env="textworld/tw-simple")]))[0]
  no_twin = fake_env.episode(0, fake_env.BoxesWithoutTwin)
  pairs = [(episodes[0], 0), (toy, 0), (no_twin, 0), (no_twin, 1), (toy, 1)]
  predicted, skipped = baselines.twin_predictions(pairs)
  assert predicted[0] is not None and predicted[1:] == [None] * 4
  assert skipped == {baselines.NOT_BUILTIN: 2, baselines.NO_TWIN: 2}
  assert baselines.skip_note("twin", 5, skipped) == (
      "twin: scored 1 of 5 transitions; skipped 2 no twin world (fork_hidden not "
      "implemented), 2 not a built-in environment")
  assert baselines.skip_note("copy", 5, {}) is None


def test_evaluate_baseline_reports_like_a_model(episodes):
  examples = _examples(episodes)
  twin = baselines.evaluate_baseline("twin", examples)
  copy = baselines.evaluate_baseline("copy", examples)
  assert twin.selected == copy.selected == len(examples) == twin.report["examples"]
  assert twin.report["num_samples"] == 1 and len(twin.samples[0]) == 1
  assert twin.report["overall"]["pass"]["mean"] == 1.0
  assert twin.report["overall"]["pass_all"]["mean"] < 1.0
  # s_t never states the new count of opened boxes.
  assert copy.report["overall"]["pass"]["mean"] == 0.0
  for key in ("pass", "pass_all", "determined_acc", "revealed_valid"):
    o = twin.report["overall"][key]
    assert o["low"] <= o["mean"] <= o["high"] and o["n"] == len(examples)
  with pytest.raises(ValueError, match="predicts none of the 3 selected"):
    baselines.evaluate_baseline("twin", _examples([fake_env.episode(0, fake_env.BoxesWithoutTwin)]))
  with pytest.raises(ValueError, match="unknown baseline 'oracle'"):
    baselines.evaluate_baseline("oracle", examples)
