"""Tests of the household environment: determinism, expert, checks, steers."""

import copy
import random
import re

import pytest

from mdlm_wm.checks import generic
from mdlm_wm.data import schema
from mdlm_wm.data.schema import Step
from mdlm_wm.envs import household
from mdlm_wm.envs.base import run_episode
from mdlm_wm.envs.household import BROKEN, DARK, STICKY, HouseholdEnv


def _episodes(seeds, policy, steer=None):
  env = HouseholdEnv()
  return [run_episode(env, seed, policy, steer=steer)[0] for seed in seeds]


def _corrupt_status(text, key, new):
  """Replaces the value of `key` in the trailing status line."""
  out, n = re.subn(rf"({key}: )[^|\]]*", rf"\g<1>{new}", text)
  assert n == 1
  return out


def _prefix_until(env, seed, steer, wanted):
  """Expert actions from reset until the expert's next action starts with `wanted`."""
  env.reset(seed, steer=steer)
  actions = []
  for _ in range(env.max_steps):
    action = env.expert_action()
    if action.startswith(wanted):
      return actions, action
    assert env.step(action).valid
    actions.append(action)
  raise AssertionError(f"expert never chose {wanted!r}")


def _replay(env, seed, steer, actions):
  env.reset(seed, steer=steer)
  for action in actions:
    assert env.step(action).valid


def _seed_of_kind(kind):
  env = HouseholdEnv()
  for seed in range(200):
    env.reset(seed, steer="")
    if env._w.task.kind == kind:
      return seed
  raise AssertionError(kind)


def test_determinism():
  for seed in (0, 1, 2):
    for policy in ("expert", "noisy", "random"):
      a = schema.episode_to_dict(_episodes([seed], policy)[0])
      b = schema.episode_to_dict(_episodes([seed], policy)[0])
      assert a == b


def test_seeds_differ_and_task_kinds_vary():
  env = HouseholdEnv()
  firsts, kinds, steers = set(), set(), 0
  for seed in range(60):
    spec, first = env.reset(seed)
    firsts.add(first)
    kinds.add(env._w.task.kind)
    steers += bool(spec.steer)
  assert len(firsts) > 50
  assert kinds == {"pick", "heat", "cool", "clean", "two"}
  assert 10 <= steers <= 35


def test_spec_shape():
  spec, first = HouseholdEnv().reset(4, steer=DARK)
  assert spec.initial_state == first and spec.tools == ()
  assert 3 <= len(spec.rules) <= 8 and spec.steer == DARK
  assert any(DARK in r for r in spec.rules)
  assert first.endswith("| lights: off]")
  with pytest.raises(ValueError):
    HouseholdEnv().reset(4, steer="make it rain")


def test_expert_success_rate():
  eps = _episodes(range(50), "expert")
  assert sum(ep.meta["success"] for ep in eps) >= 48
  for ep in eps:
    if ep.meta["success"]:
      assert ep.steps[-1].done and ep.steps[-1].reward == 1.0
      done, total = ep.steps[-1].checks.fields["progress"].split("/")
      assert done == total


def test_noisy_expert_mostly_succeeds():
  eps = _episodes(range(30), "noisy")
  assert sum(ep.meta["success"] for ep in eps) >= 25
  assert sum(ep.meta["failed_actions"] for ep in eps) > 0


@pytest.mark.parametrize("policy", ["expert", "noisy", "random"])
def test_reference_states_score_one(policy):
  for ep in _episodes(range(30), policy):
    prev = ep.spec.initial_state
    for step in ep.steps:
      assert step.state == prev
      prev = step.next_state
      assert len(step.next_state) <= 1000
      assert generic.check_score(step.checks, step.next_state) == 1.0, step
      assert HouseholdEnv.state_check(ep.spec, step, step.next_state) == 1.0, step


def _step_with_listing():
  """A reference step whose view lists at least one object."""
  for ep in _episodes(range(10), "expert"):
    for step in ep.steps:
      if int(step.checks.fields["visible"]) >= 1:
        return ep.spec, step
  raise AssertionError("no listing")


def test_corrupted_predictions_score_lower():
  spec, step = _step_with_listing()
  text = step.next_state
  check = lambda pred: HouseholdEnv.state_check(spec, step, pred)
  assert check(text) == 1.0
  visible = int(step.checks.fields["visible"])
  assert check(_corrupt_status(text, "visible", visible + 1)) < 1.0
  assert check(_corrupt_status(text, "progress", "7/9")) < 1.0
  assert check(_corrupt_status(text, "open", "safe")) < 1.0
  assert check(_corrupt_status(text, "holding", "vase")) < 1.0
  # A listed object removed (and the count kept): include and count both fail.
  listed = re.search(r"you see: ([^.]*)\.", text).group(1).split(", ")
  fewer = ", ".join(listed[1:]) or "nothing"
  removed = text.replace(f"you see: {', '.join(listed)}.", f"you see: {fewer}.")
  assert removed != text and check(removed) < 1.0
  # Count changed consistently in the text but not in the hidden state.
  both = _corrupt_status(removed, "visible", len(listed) - 1)
  assert check(both) < 1.0
  # An inconsistent count alone (fields ignored) is caught by the parser.
  inconsistent = Step(step.state, step.action, text, checks=schema.Checks())
  off_by_two = _corrupt_status(text, "visible", visible + 2)
  assert HouseholdEnv.state_check(spec, inconsistent, off_by_two) < 1.0
  assert HouseholdEnv.state_check(spec, inconsistent, text) == 1.0


@pytest.mark.parametrize(
    "garbage", ["", "hello", "[", "[a | b]", "]]][[[", "[visible: x | progress: a/b]"])
def test_state_check_on_garbage(garbage):
  spec, step = _step_with_listing()
  score = HouseholdEnv.state_check(spec, step, garbage)
  assert 0.0 <= score < 0.3


def test_state_check_on_random_bytes():
  spec, step = _step_with_listing()
  rng = random.Random(0)
  for _ in range(20):
    text = bytes(rng.randrange(256) for _ in range(200)).decode("latin-1")
    score = HouseholdEnv.state_check(spec, step, text)
    assert 0.0 <= score < 0.3


def test_invalid_actions_fail_and_change_nothing():
  env = HouseholdEnv()
  rng = random.Random(1)
  for seed in range(20):
    env.reset(seed)
    for _ in range(3):  # also from a state the expert has moved on from
      env.step(env.expert_action())
    before = copy.deepcopy(env._w)
    for _ in range(5):
      res = env.step(env.invalid_action(rng))
      assert not res.valid and res.reward == 0.0 and not res.done
      assert res.next_state.startswith("Error:")
      assert "Error:" in res.checks.must_include
      assert env._w == before


def test_object_names_never_inside_other_names():
  """must_exclude is a substring test: no object name may hide inside other text."""
  others = list(household._FURNITURE) + list(household._ROOM_CHOICES) + [
      "center", "nothing", "none", "plain", "condition", "carrying", "examine", "closed",
      "furniture", "exits", "progress", "visible", "holding"]
  for kind in household._KINDS:
    for other in others + [k for k in household._KINDS if k != kind]:
      assert kind not in other, (kind, other)


def test_sticky_doors_need_two_tries():
  env = HouseholdEnv()
  for seed in range(5):
    actions, open_action = _prefix_until(env, seed, "", "open ")
    target = open_action[len("open "):]
    normal = env.step(open_action)
    assert normal.valid and target in normal.checks.fields["open"].split(", ")
    _replay(env, seed, STICKY, actions)
    first = env.step(open_action)
    assert first.valid and target not in first.checks.fields["open"].split(", ")
    assert first.checks.fields["tries"] == "1/2" and first.checks.fields["doors"] == "sticky"
    assert "tries: 1/2" in first.next_state
    second = env.step(open_action)
    assert target in second.checks.fields["open"].split(", ")
    assert second.checks.fields["tries"] == "2/2"
    return
  raise AssertionError("no seed opened anything")


def test_broken_microwave_heats_nothing():
  env = HouseholdEnv()
  seed = _seed_of_kind("heat")
  actions, heat = _prefix_until(env, seed, "", "heat ")
  assert heat.endswith("with microwave")
  normal = env.step(heat)
  assert normal.valid and normal.checks.fields["state"].startswith("hot")
  _replay(env, seed, BROKEN, actions)
  broken = env.step(heat)
  assert not broken.valid and "hot" not in broken.checks.fields["state"]
  assert broken.checks.fields["microwave"] == "broken"
  assert generic.states_field(broken.next_state, "microwave", "broken")
  # The expert switches to the stove and still solves the task.
  assert run_episode(env, seed, "expert", steer=BROKEN)[1].success


def test_lights_off_hide_contents_until_examined():
  env = HouseholdEnv()
  for seed in range(10):
    actions, take = _prefix_until(env, seed, "", "take ")
    lit = env.step("look")
    obj = re.match(r"take (.+) from", take).group(1)
    _replay(env, seed, DARK, actions)
    dark = env.step("look")
    assert obj in lit.checks.must_include and int(lit.checks.fields["visible"]) >= 1
    assert obj in dark.checks.must_exclude and dark.checks.fields["visible"] == "0"
    assert dark.checks.fields["lights"] == "off"
    assert not env.step(take).valid
    rec = take.rsplit(" from ", 1)[1]
    seen = env.step(f"examine {rec}")
    assert obj in seen.checks.must_include
    assert seen.checks.fields["visible"] == lit.checks.fields["visible"]
    assert env.step(take).valid
    return
  raise AssertionError("no seed took anything")


def test_steered_experts_succeed():
  for steer in HouseholdEnv.steers:
    eps = _episodes(range(20), "expert", steer=steer)
    assert sum(ep.meta["success"] for ep in eps) >= 19, steer
