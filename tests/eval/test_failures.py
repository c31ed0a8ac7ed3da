"""Failure kinds on steered and adversarial transitions: the sets, the kinds and
the steer effect, on worlds whose right answers are known."""

import json
import os
import subprocess
import sys

import pytest

from mdlm_wm.envs import registry
from mdlm_wm.envs.base import run_episode
from mdlm_wm.envs.shop import STEER_FLAKY
from mdlm_wm.eval import failures

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _flaky_buy():
  """A shop buy episode under the flaky-payment steer whose expert checks out."""
  for seed in range(50):
    ep, _ = run_episode(registry.make("shop"), seed, "expert", steer=STEER_FLAKY)
    codes = [failures.status(s.next_state) for s in ep.steps]
    if 503 in codes:
      return ep, codes.index(503)
  raise AssertionError("no flaky checkout in 50 seeds")


@pytest.fixture(scope="module")
def flaky():
  return _flaky_buy()


def test_the_flaky_checkout_is_a_steer_fact_and_a_tool_error(flaky):
  ep, k = flaky
  facts = failures.steer_facts(ep)
  assert "field:status" in facts[k]  # without the steer the first checkout succeeds
  sets = failures.build_sets([ep], history_len=1)
  assert k in [c.example.index for c in sets["steered"]]
  assert k in [c.example.index for c in sets["tool_error"]]
  plain, _ = run_episode(registry.make("shop"), ep.meta["seed"], "expert", steer="")
  assert not any(failures.steer_facts(plain))


def test_kinds_of_the_real_state_the_copy_and_garbage(flaky):
  ep, k = flaky
  case = next(c for c in failures.build_sets([ep], 1)["steered"] if c.example.index == k)
  real = failures.kinds(case, failures.check(case, ep.steps[k].next_state))
  assert real == {"format": 0.0, "determined": 0.0, "rule": 0.0, "steer_ignored": 0.0}
  # The copy of s_t keeps the last reply's 200: it ignores the steer.
  assert failures.kinds(case, failures.check(case, ep.steps[k].state))["steer_ignored"] == 1.0
  assert failures.kinds(case, failures.check(case, "no json at all")) == {"format": 1.0}


def test_an_unknown_tool_gets_the_real_error_and_the_copy_hallucinates(flaky):
  ep, _ = flaky
  probe = failures.unknown_tool_probe(ep, 2)
  action = probe.steps[-1].action
  assert action.split("(")[0] not in {t.name for t in ep.spec.tools}
  assert failures.status(probe.steps[-1].next_state) == 422
  assert probe.steps[:2] == ep.steps[:2] and len(probe.steps) == 3
  case = failures.build_sets([ep], 1)["unknown_tool"][0]
  kinds = lambda text: failures.kinds(case, failures.check(case, text))
  assert kinds(case.example.step.next_state)["hallucinated_tool"] == 0.0
  assert kinds(case.example.step.state)["hallucinated_tool"] == 1.0


@pytest.mark.parametrize("env,tool", [("shop", "cancel_order"),
                                      ("calendar", "calendar_delete_event")])
def test_a_user_who_changes_intent_gets_the_real_reply_and_the_copy_ignores_it(env, tool):
  ep, _ = run_episode(registry.make(env), 3, "noisy")
  sets = failures.build_sets([ep], 1)
  (case,) = sets["intent_change"]
  probe, step = case.example.episode, case.example.step
  assert probe.spec.task.startswith(ep.spec.task) and "changed their mind" in probe.spec.task
  assert step.action.startswith(tool + "(") and failures.status(step.next_state) == 200
  assert step is probe.steps[-1] and case.intent_facts
  kinds = lambda text: failures.kinds(case, failures.check(case, text))
  assert kinds(step.next_state) == {"format": 0.0, "determined": 0.0, "rule": 0.0,
                                    "intent_ignored": 0.0}
  assert kinds(step.state)["intent_ignored"] == 1.0
  # The world's reply had the user kept their intent is not the one asked for.
  kept = ep.steps[min(len(probe.steps), len(ep.steps)) - 1].next_state
  assert kinds(kept)["intent_ignored"] == 1.0


def test_build_sets_builds_only_the_sets_asked_for(flaky):
  ep, _ = flaky
  every = failures.build_sets([ep], 1)
  some = failures.build_sets([ep], 1, names=["intent_change", "steered"])
  assert list(some) == ["intent_change", "steered"]
  for name in some:
    assert [c.example.key for c in some[name]] == [c.example.key for c in every[name]]
  with pytest.raises(ValueError, match="unknown sets \\['bogus'\\]"):
    failures.build_sets([ep], 1, names=["bogus"])


def test_environments_without_a_user_have_no_change_of_intent():
  ep, _ = run_episode(registry.make("household"), 0, "expert")
  assert failures.intent_probe(ep, 0) is None
  assert not failures.build_sets([ep], 1)["intent_change"]


def test_run_tallies_each_set_and_the_steer_effect(flaky):
  ep, _ = flaky
  sets = failures.build_sets([ep], 1)
  oracle = lambda examples, steers: [
      ex.step.next_state if steer is None else ex.step.state
      for ex, steer in zip(examples, steers)]
  rep = failures.run(sets, oracle)
  steered = rep["sets"]["steered"]
  assert steered["any"]["mean"] == 0.0 and steered["transitions"] == len(sets["steered"])
  effect = rep["steer_effect"]
  assert effect["with"]["mean"] == 1.0 and effect["without"]["mean"] == 0.0
  assert effect["diff"]["mean"] == 1.0
  assert rep["intent_facts"]["mean"] == 1.0
  copy = failures.run(sets, failures.baseline_predict("copy"))
  assert copy["sets"]["unknown_tool"]["hallucinated_tool"]["mean"] == 1.0
  assert copy["sets"]["intent_change"]["intent_ignored"]["mean"] == 1.0
  assert copy["intent_facts"]["mean"] == 0.0 and "intent facts right" in failures.format_report(copy)
  assert "| steered |" in failures.format_report(copy)
  # The twin world knows every determined fact and answers the unknown tool as the world does.
  twin = failures.run(sets, failures.baseline_predict("twin"))
  assert all(t["any"]["mean"] == 0.0 for t in twin["sets"].values())


@pytest.mark.slow
def test_command_line(tiny_corpus, tiny_models, tmp_path):
  out = tmp_path / "failures.json"
  proc = subprocess.run(
      [sys.executable, "-m", "launch.failures", f"--workdir={tiny_models['ar']}",
       f"--data={tiny_corpus}/test.jsonl,{tiny_corpus}/valid.jsonl", "--max_per_set=3",
       "--temperature=0", f"--out={out}"],
      cwd=REPO, capture_output=True, text=True, timeout=900, check=False)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  rep = json.loads(out.read_text())
  assert rep["source"]["objective"] == "ar"
  assert all(t["transitions"] <= 3 for t in rep["sets"].values())
  assert "unknown_tool" in rep["sets"] and "| set |" in proc.stdout
