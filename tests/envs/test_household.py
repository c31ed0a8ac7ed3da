"""Tests of the household environment: determinism, expert, checks, steers,
revealed facts and the twin world."""

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
from mdlm_wm.envs.twin import twin_next_states


def _episodes(seeds, policy, steer=None):
  env = HouseholdEnv()
  return [run_episode(env, seed, policy, steer=steer)[0] for seed in seeds]


def _corrupt_status(text, key, new):
  """Replaces the value of `key` in the trailing status line."""
  out, n = re.subn(rf"({key}: )[^|\]]*?(?= \||\])", rf"\g<1>{new}", text)
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
      assert HouseholdEnv.check(ep.spec, step, step.next_state).passed_all, step


def _step_with_listing(first_look=False):
  """A reference step whose view lists at least one object, shown for the
  first time (its listing revealed) or not (its listing determined)."""
  for ep in _episodes(range(10), "expert"):
    for step in ep.steps:
      if (int(step.checks.fields["visible"]) >= 1
          and step.checks.is_revealed_field("visible") == first_look):
        return ep.spec, step
  raise AssertionError("no listing")


def test_corrupted_predictions_score_lower():
  spec, step = _step_with_listing()
  assert not step.checks.revealed
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


# ---- revealed facts, constraints and the twin world


def _transitions(seeds, policies=("expert", "noisy", "random")):
  return [(ep.spec, step) for policy in policies for ep in _episodes(seeds, policy)
          for step in ep.steps]


def _first_visits():
  """Reference steps that show a room for the first time, other than the kitchen."""
  out = [(spec, step) for spec, step in _transitions(range(15), ("expert",))
         if step.checks.is_revealed_field("open") and step.checks.fields["room"] != "kitchen"]
  assert out
  return out


def _replace_view_list(text, label, names):
  """`label: a, b.` in a room view replaced by the given names."""
  out, n = re.subn(rf"({label}: )[^.]*\.", rf"\g<1>{', '.join(names)}.", text)
  assert n == 1
  return out


def _listing(text):
  return re.search(r"you see: ([^.]*)\.", text).group(1).split(", ")


def _relist(text, names):
  """The listing replaced by `names`, with a matching `visible` count."""
  old = f"you see: {', '.join(_listing(text))}."
  out = text.replace(old, f"you see: {', '.join(names) or 'nothing'}.")
  return _corrupt_status(out, "visible", len(names))


def _other_kind(step, avoid):
  """An object kind the step neither excludes nor shows."""
  return next(k for k in household._KINDS
              if k not in step.checks.must_exclude and k not in avoid
              and k not in step.next_state)


def test_steps_mark_what_is_shown_for_the_first_time():
  env = HouseholdEnv()
  spec, first = env.reset(2, steer="")
  start = env._w.room
  exit_ = env._w.exits[start][0]
  there = env.step(f"go to {exit_}")
  assert there.checks.revealed == ("open",)
  back = env.step(f"go to {start}")
  assert back.checks.revealed == ()
  assert env.step(f"go to {exit_}").checks.revealed == ()
  # First look at a piece that shows its contents: count and new objects revealed.
  piece = next(n for n in env._w.furniture[exit_] if not env._w.recs[n].openable)
  look = env.step(f"go to {piece}")
  listed = set(_listing(look.next_state)) - {"nothing"}
  assert set(look.checks.revealed) == {"visible"} | listed
  assert env.step("look").checks.revealed == ()
  env.step(f"go to {exit_}")
  again = env.step(f"go to {piece}")
  assert again.checks.revealed == () and set(_listing(again.next_state)) - {"nothing"} == listed


def test_first_look_excludes_only_objects_seen_before():
  """An unseen task object may lie anywhere a first look shows; elsewhere it is excluded."""
  env = HouseholdEnv()
  looks = others = 0
  for seed in range(10):
    env.reset(seed, steer="")
    for _ in range(12):
      unseen = [n for n in env._w.objs if n not in env._w.seen]
      res = env.step(env.expert_action())
      unseen = [n for n in unseen if n not in res.checks.must_include]
      if res.checks.is_revealed_field("visible"):
        looks += bool(unseen)
        assert not set(unseen) & set(res.checks.must_exclude)
      else:
        others += bool(unseen)
        assert set(unseen) <= set(res.checks.must_exclude)
      if res.done:
        break
  assert looks and others


def test_revealed_listing_predicted_wrongly_still_passes():
  spec, step = _step_with_listing(first_look=True)
  listed = _listing(step.next_state)
  other = _other_kind(step, listed)
  held = step.checks.fields["holding"]
  keep = [n for n in listed if n not in step.checks.revealed]  # objects put there before
  wrong = _relist(step.next_state, keep + [other])
  result = HouseholdEnv.check(spec, step, wrong)
  assert result.passed and not result.passed_all, result.failures()
  assert not result.revealed["view:items"] and other != held
  assert HouseholdEnv.state_check(spec, step, wrong) == 1.0


def test_revealed_room_predicted_wrongly_still_passes():
  spec, step = _first_visits()[0]
  room = step.checks.fields["room"]
  furniture = re.search(r"Furniture: ([^.]*)\.", step.next_state).group(1).split(", ")
  other = [k for k in household._room_kinds(room)
           if k not in household._NUMBERED and k not in furniture][:2]
  wrong = _replace_view_list(step.next_state, "Furniture", other)
  before = household.parse_status_line(step.state)["open"]
  wrong = _corrupt_status(wrong, "open", before)
  result = HouseholdEnv.check(spec, step, wrong)
  assert result.passed and not result.passed_all, result.failures()
  assert not result.revealed["view:furniture"]


def test_wrong_determined_facts_fail():
  for spec, step in (_step_with_listing(first_look=True), _step_with_listing()):
    text = step.next_state
    for key, value in (("progress", "7/9"), ("holding", "vase"), ("room", "attic")):
      result = HouseholdEnv.check(spec, step, _corrupt_status(text, key, value))
      assert not result.passed and f"determined:field:{key}" in result.failures()
    wrong_msg = HouseholdEnv.check(spec, step, "You dance. " + text)
    assert wrong_msg.failures() == ["determined:message"]
  # A listing seen before is determined: another one fails even if consistent.
  spec, step = _step_with_listing()
  other = _other_kind(step, _listing(step.next_state))
  result = HouseholdEnv.check(spec, step, _relist(step.next_state, [other]))
  assert not result.passed and "determined:view:items" in result.failures()
  # An object seen elsewhere may not appear in a first look.
  for spec, step in _transitions(range(20)):
    seen = [n for n in step.checks.must_exclude if n != "Error:"]
    if step.checks.is_revealed_field("visible") and seen:
      wrong = _relist(step.next_state, _listing(step.next_state) + seen[:1])
      assert f"determined:exclude:{seen[0]}" in HouseholdEnv.check(spec, step, wrong).failures()
      return
  raise AssertionError("no first look after an object was seen")


def test_invented_content_breaking_the_rules_fails():
  spec, step = _step_with_listing(first_look=True)
  bogus = HouseholdEnv.check(spec, step, _relist(step.next_state, ["banana"]))
  assert bogus.failures() == ["constraint:items_are_objects"]
  twice = _listing(step.next_state)[:1] * 2
  assert "constraint:items_are_objects" in HouseholdEnv.check(
      spec, step, _relist(step.next_state, twice)).failures()
  miscounted = _corrupt_status(step.next_state, "visible", len(_listing(step.next_state)) + 1)
  assert "constraint:visible_matches_view" in HouseholdEnv.check(
      spec, step, miscounted).failures()

  spec, step = _first_visits()[0]
  text = step.next_state
  furniture = re.search(r"Furniture: ([^.]*)\.", text).group(1).split(", ")
  exits = re.search(r"Exits: ([^.]*)\.", text).group(1).split(", ")
  came_from = household.parse_status_line(step.state)["room"]
  cases = {
      "furniture_allowed": _replace_view_list(text, "Furniture", furniture + ["fridge"]),
      "exits_allowed": _replace_view_list(
          text, "Exits", [e for e in exits if e != came_from] + ["garage"]),
      "open_extends_previous": _corrupt_status(text, "open", "safe"),
  }
  for name, wrong in cases.items():
    result = HouseholdEnv.check(spec, step, wrong)
    assert f"constraint:{name}" in result.failures(), (name, result.failures())
    assert not result.passed


def test_names_are_judged_by_form_not_by_hidden_pieces():
  """Errors about furniture or rooms elsewhere read alike whether or not they exist."""
  env = HouseholdEnv()
  checked = 0
  for seed in range(30):
    env.reset(seed, steer="")
    w = env._w
    target = w.task.target
    if w.recs[target].room == w.room:
      continue
    missing = next(f"shelf {n}" for n in range(1, 9) if f"shelf {n}" not in w.recs)
    for place in (target, missing):
      res = env.step(f"go to {place}")
      assert res.next_state.startswith(f"Error: the {place} is not in the {w.room}.")
      res = env.step(f"open {place}" if "shelf" not in place else f"examine {place}")
      assert res.next_state.startswith(f"Error: you are not at the {place}.") or (
          "cannot be opened" in res.next_state)
    far = [r for r in household._ROOM_CHOICES if r != w.room and r not in w.exits[w.room]]
    for room in far:
      assert env.step(f"go to {room}").next_state.startswith(
          f"Error: the {room} is not an exit of the {w.room}.")
    checked += 1
  assert checked >= 10


def test_twin_world_passes_the_original_checks():
  passed = total = differs = 0
  for policy in ("expert", "noisy", "random"):
    for steer in (None, DARK):
      for ep in _episodes(range(6), policy, steer=steer):
        for step, twin in zip(ep.steps, twin_next_states(ep)):
          total += 1
          passed += HouseholdEnv.check(ep.spec, step, twin).passed
          if not step.checks.revealed:
            assert twin == step.next_state  # nothing new drawn: the same world
          differs += twin != step.next_state
  assert passed >= 0.99 * total
  # fork_hidden re-draws: some first sights differ in the twin.
  assert differs >= 5


def test_fork_hidden_keeps_what_was_shown():
  """A twin forked after a few steps keeps the rooms shown so far and draws a
  room not yet visited anew (differently for some seed)."""
  env = HouseholdEnv()
  redrawn = 0
  for seed in range(10):
    env.reset(seed, steer="")
    env.step(env.expert_action())
    room = env._w.room
    new = next((r for r in env._w.exits[room] if r not in env._w.furniture), None)
    if new is None:
      continue
    twin = copy.deepcopy(env)
    twin.fork_hidden("twin1")
    a, b = env.step(f"go to {new}"), twin.step(f"go to {new}")
    assert a.checks.revealed == b.checks.revealed == ("open",)
    assert twin._w.furniture[room] == env._w.furniture[room]
    redrawn += twin._w.furniture[new] != env._w.furniture[new]
  assert redrawn >= 2
