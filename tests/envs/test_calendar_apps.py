"""Tests of the calendar apps environment: determinism, expert, checks, steers."""

import copy
import json
import random

import pytest

from mdlm_wm.checks import generic
from mdlm_wm.data import schema
from mdlm_wm.data.schema import Step
from mdlm_wm.envs import toolcall
from mdlm_wm.envs.base import run_episode
from mdlm_wm.envs.calendar_apps import (STEER_LATE, STEER_LUNCH, STEER_SUBJECT, STEER_VACATION,
                                        STEERS, CalendarAppsEnv)


def _env():
  return CalendarAppsEnv()


def _hidden(env):
  """Everything an action could change, as comparable values."""
  return copy.deepcopy((env._events, env._inbox, env._sent, env._deleted, env._next_event,
                        env._known, env._listed, env._inbox_listed))


def _episode(seed, policy, steer=None):
  env = _env()
  ep, stats = run_episode(env, seed, policy, steer=steer)
  return env, ep, stats


def _step_with(action, env):
  res = env.step(action)
  return res, json.loads(res.next_state.rsplit("\n", 1)[0])


def test_determinism():
  for seed in range(5):
    for policy in ("expert", "noisy", "random"):
      a = schema.episode_to_dict(_episode(seed, policy)[1])
      b = schema.episode_to_dict(_episode(seed, policy)[1])
      assert a == b
  assert _episode(1, "random")[1].steps != _episode(2, "random")[1].steps


def test_world_varies_with_seed():
  initial = {_env().reset(seed)[0].initial_state for seed in range(20)}
  tasks = {_env().reset(seed)[0].task.split()[0] for seed in range(20)}
  assert len(initial) == 20
  assert len(tasks) >= 3


def test_expert_success_rate():
  wins = sum(_episode(seed, "expert")[2].success for seed in range(50))
  assert wins >= 48


def test_noisy_mostly_succeeds():
  wins = sum(_episode(seed, "noisy")[2].success for seed in range(50))
  assert wins >= 40


def test_steer_frequency_and_forcing():
  steers = [_env().reset(seed)[0].steer for seed in range(200)]
  share = sum(bool(s) for s in steers) / len(steers)
  assert 0.2 < share < 0.5
  assert set(steers) == set(STEERS) | {""}
  env = _env()
  assert env.reset(3, steer="")[0].steer == ""
  spec, _ = env.reset(3, steer=STEER_LUNCH)
  assert spec.steer == STEER_LUNCH and any("12:00-13:00" in r for r in spec.rules)
  with pytest.raises(ValueError):
    env.reset(3, steer="be nice")


def test_reference_states_pass_checks():
  for seed in range(30):
    for policy in ("expert", "noisy", "random"):
      env, ep, _ = _episode(seed, policy)
      assert ep.spec.tools and 3 <= len(ep.spec.rules) <= 8
      for step in ep.steps:
        assert len(step.next_state) <= 1000
        assert generic.check_score(step.checks, step.next_state) == 1.0, step.next_state
        assert env.state_check(ep.spec, step, step.next_state) == 1.0, step.next_state
        assert step.next_state.rstrip().endswith("]")


def _steps_of(seed, prefix):
  """Steps of a noisy episode whose response starts with `prefix`."""
  env, ep, _ = _episode(seed, "noisy")
  return env, ep, [s for s in ep.steps if s.next_state.startswith(prefix)]


def test_corrupted_trailing_fact_scores_lower():
  env, ep, _ = _episode(0, "expert")
  step = ep.steps[-1]
  total = step.checks.fields["total_events"]
  bad = step.next_state.replace(f"total_events: {total}", f"total_events: {int(total) + 1}")
  assert bad != step.next_state
  assert env.state_check(ep.spec, step, bad) < 1.0
  assert generic.check_score(step.checks, bad) < 1.0


def _listing_steps():
  for seed in range(10):
    env, ep, steps = _steps_of(seed, '{"status": 200, "date"')
    for step in steps:
      if step.checks.fields["count"] != "0":
        yield env, ep, step


def test_removed_entity_and_bad_totals_score_lower():
  checked = 0
  for env, ep, step in _listing_steps():
    body, footer = step.next_state.rsplit("\n", 1)
    obj = json.loads(body)
    removed = dict(obj, events=obj["events"][1:])
    recount = dict(obj, count=obj["count"] + 1)
    rebusy = dict(obj, busy_minutes=obj["busy_minutes"] + 15)
    # A count that agrees with the shortened list still misses the entity.
    consistent = dict(removed, count=len(removed["events"]))
    for variant in (removed, recount, rebusy, consistent):
      text = json.dumps(variant) + "\n" + footer
      assert env.state_check(ep.spec, step, text) < 1.0
    checked += 1
  assert checked >= 5


def test_inconsistent_unread_scores_lower():
  env = _env()
  spec, _ = env.reset(4)
  res = env.step('email_list_inbox()')
  step = Step("", "", res.next_state, checks=res.checks)
  body, footer = res.next_state.rsplit("\n", 1)
  obj = json.loads(body)
  obj["messages"][0]["read"] = not obj["messages"][0]["read"]
  assert env.state_check(spec, step, json.dumps(obj) + "\n" + footer) < 1.0
  assert env.state_check(spec, step, res.next_state) == 1.0


def test_state_check_on_garbage():
  env, ep, _ = _episode(2, "expert")
  step = ep.steps[0]
  rng = random.Random(0)
  noise = "".join(chr(rng.randrange(1, 0x2FF)) for _ in range(300))
  malformed = ('{"events": [1, 2], "count": 2, "busy_minutes": "a"}\n'
               "[total_events: 1 | unread: 0 | sent: 0]")
  for text in ("", "hello", noise, "[total_events: x]", "{}", "[]", '{"events": 3}',
               "[" * 100000, malformed):
    score = env.state_check(ep.spec, step, text)
    assert isinstance(score, float) and 0.0 <= score < 1.0


def test_invalid_actions_fail_without_side_effects():
  env = _env()
  rng = random.Random(7)
  statuses = set()
  for seed in range(20):
    env.reset(seed)
    for _ in range(5):
      before = _hidden(env)
      res = env.step(env.invalid_action(rng))
      assert not res.valid and not res.done and res.reward == 0.0
      obj = json.loads(res.next_state.rsplit("\n", 1)[0])
      assert obj["status"] >= 400 and obj["error"]
      statuses.add(obj["status"])
      assert _hidden(env) == before
  assert statuses == {400, 404, 422}


def test_random_actions_are_well_formed_tool_calls():
  env = _env()
  env.reset(5)
  rng = random.Random(1)
  names = {t.name for t in env.reset(5)[0].tools}
  for _ in range(50):
    name, _ = toolcall.parse_tool_call(env.random_action(rng))
    assert name in names


def test_conflict_and_unknown_attendee():
  env = _env()
  env.reset(6, steer="")
  date = env._week[0]
  event = env._day(date)[0]
  email = env._contacts[0].email
  res, obj = _step_with(toolcall.format_tool_call("calendar_create_event", {
      "title": "Clash", "date": date, "start": "08:00", "end": "20:00", "attendees": [email]}), env)
  assert obj["status"] == 409 and obj["conflict"] == event.id and not res.valid
  res, obj = _step_with(toolcall.format_tool_call("calendar_create_event", {
      "title": "Clash", "date": date, "start": "19:00", "end": "19:30",
      "attendees": ["nobody@example.com"]}), env)
  assert obj["status"] == 422


def _create(env, start, end, attendees=None, date=None):
  date = date or env._week[0]
  attendees = attendees if attendees is not None else [env._contacts[0].email]
  return _step_with(toolcall.format_tool_call("calendar_create_event", {
      "title": "Probe", "date": date, "start": start, "end": end, "attendees": attendees}), env)


def test_steer_late_rejects_evening_meetings():
  for steer, status in (("", 201), (STEER_LATE, 409)):
    env = _env()
    env.reset(8, steer=steer)
    res, obj = _create(env, "19:00", "19:30")
    assert obj["status"] == status
    assert res.checks.fields["status"] == str(status)
    if steer:
      assert res.checks.fields["error"] == "meetings must end by 17:00"


def test_steer_lunch_rejects_lunch_meetings():
  found = 0
  for seed in range(30):
    env = _env()
    env.reset(seed, steer="")
    free = [d for d in env._week
            if all(e.end <= 720 or e.start >= 780 for e in env._day(d))]
    if not free:
      continue
    assert _create(env, "12:00", "12:30", date=free[0])[1]["status"] == 201
    env.reset(seed, steer=STEER_LUNCH)
    res, obj = _create(env, "12:00", "12:30", date=free[0])
    assert obj["status"] == 409 and "lunch" in res.checks.fields["error"]
    found += 1
  assert found >= 3


def test_steer_lunch_changes_expert_slots():
  moved = 0
  for seed in range(60):
    starts = []
    for steer in ("", STEER_LUNCH):
      env, ep, stats = _episode(seed, "expert", steer=steer)
      assert stats.success
      starts.append([s.checks.fields.get("start") for s in ep.steps])
      if steer:
        assert all(not ("12:00" <= f <= "12:45") for f in starts[-1] if f)
    moved += starts[0] != starts[1]
  assert moved >= 1


def test_steer_vacation_declines_and_expert_delegates():
  delegated = 0
  for seed in range(40):
    env = _env()
    env.reset(seed, steer="")
    if env._task.kind != "schedule":
      continue
    person = env._task.person
    _, plain = _create(env, "19:00", "19:30", [person])
    assert plain["accepted"] == 1 and plain["declined"] == []
    env.reset(seed, steer=STEER_VACATION)
    res, obj = _create(env, "19:00", "19:30", [person])
    assert obj["declined"] == [person] and obj["accepted"] == 0
    assert person in res.checks.must_include and res.checks.fields["accepted"] == "0"
    env, ep, stats = _episode(seed, "expert", steer=STEER_VACATION)
    assert stats.success
    created = [s for s in ep.steps if s.action.startswith("calendar_create_event")]
    assert person not in created[-1].action
    delegated += 1
  assert delegated >= 3


def test_steer_subject_limits_subjects():
  for steer, status in (("", 200), (STEER_SUBJECT, 400)):
    env = _env()
    env.reset(9, steer=steer)
    res, obj = _step_with(toolcall.format_tool_call("email_send", {
        "to": env._contacts[0].email, "subject": "A rather long subject line",
        "body": "Hello."}), env)
    assert obj["status"] == status and res.valid == (status == 200)
  for seed in range(10):
    env, ep, stats = _episode(seed, "expert", steer=STEER_SUBJECT)
    assert stats.success
    sends = [s for s in ep.steps if s.action.startswith("email_send")]
    assert all(len(json.loads(s.action[len("email_send("):-1])["subject"]) < 20 for s in sends)


def test_checks_come_from_hidden_state():
  env = _env()
  env.reset(11, steer="")
  date = env._week[2]
  res = env.step(toolcall.format_tool_call("calendar_list_events", {"date": date}))
  day = env._day(date)
  assert res.checks.fields["count"] == str(len(day))
  assert res.checks.fields["busy_minutes"] == str(sum(e.end - e.start for e in day))
  assert res.checks.fields["total_events"] == str(len(env._events))
  assert set(e.id for e in day) <= set(res.checks.must_include)
  others = [e.id for e in env._events if e.date != date]
  assert others and set(others) <= set(res.checks.must_exclude)
  assert not any(i in res.next_state for i in others)
