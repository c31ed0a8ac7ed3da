"""Tests of the calendar apps environment: determinism, expert, checks, steers,
determined vs revealed facts and the twin world."""

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
from mdlm_wm.envs.twin import twin_next_states


def _env():
  return CalendarAppsEnv()


def _hidden(env):
  """Everything an action could change, as comparable values (drawing every
  day and the inbox first: a draw is no change)."""
  days = {d: env._day(d) for d in env._week}
  return copy.deepcopy((days, env._inbox, env._sent, env._deleted, env._next_event, env._total,
                        env._unread, env._known_days, env._id_dates, env._listed,
                        env._inbox_known, env._contact_emails))


def _episode(seed, policy, steer=None):
  env = _env()
  ep, stats = run_episode(env, seed, policy, steer=steer)
  return env, ep, stats


def _step_with(action, env):
  res = env.step(action)
  return res, json.loads(res.next_state.rsplit("\n", 1)[0])


def _take(env, state, action):
  """Steps `env` from `state`: (the Step as a corpus holds it, the response)."""
  res = env.step(action)
  step = Step(state, action, res.next_state, checks=res.checks)
  return step, json.loads(res.next_state.rsplit("\n", 1)[0])


def _text(obj, step):
  """A prediction: `obj` as the response, with the step's own account line."""
  return json.dumps(obj) + "\n" + step.next_state.rsplit("\n", 1)[1]


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
        assert env.check(ep.spec, step, step.next_state).passed_all, step.next_state
        assert step.next_state.rstrip().endswith("]")


def test_corrupted_trailing_fact_scores_lower():
  env, ep, _ = _episode(0, "expert")
  step = ep.steps[-1]
  total = step.checks.fields["total_events"]
  bad = step.next_state.replace(f"total_events: {total}", f"total_events: {int(total) + 1}")
  assert bad != step.next_state
  assert env.state_check(ep.spec, step, bad) < 1.0
  assert generic.check_score(step.checks, bad) < 1.0


def _listings():
  """(env, spec, first listing, second listing) of a day, for a few worlds;
  noisy actions in between make the day's list the agent's own to follow."""
  for seed in range(12):
    env = _env()
    spec, state = env.reset(seed, steer="")
    date = env._week[seed % 5]
    lists = toolcall.format_tool_call("calendar_list_events", {"date": date})
    first, _ = _take(env, state, lists)
    moved = env._day(date)[0]
    move, _ = _take(env, first.next_state, toolcall.format_tool_call(
        "calendar_move_event", {"event_id": moved.id, "start": "19:00", "end": "19:30"}))
    second, _ = _take(env, move.next_state, lists)
    yield env, spec, first, second


def test_bad_totals_fail_and_a_missing_event_fails_where_the_day_is_known():
  for env, spec, first, second in _listings():
    assert first.checks.is_revealed_field("count") and not second.checks.revealed
    for step in (first, second):
      body, footer = step.next_state.rsplit("\n", 1)
      obj = json.loads(body)
      removed = dict(obj, events=obj["events"][1:])
      recount = dict(obj, count=obj["count"] + 1)
      rebusy = dict(obj, busy_minutes=obj["busy_minutes"] + 15)
      for variant in (removed, recount, rebusy):  # totals that disagree with the list
        assert not env.check(spec, step, _text(variant, step)).passed
      # Totals that agree with the shortened list: a day listed for the
      # first time could hold those events only; a day listed before could not.
      gone = obj["events"][0]
      consistent = dict(removed, count=obj["count"] - 1,
                        busy_minutes=obj["busy_minutes"] - _minutes(gone["end"])
                        + _minutes(gone["start"]))
      result = env.check(spec, step, _text(consistent, step))
      assert result.passed == (step is first) and not result.passed_all


def _minutes(text):
  return int(text[:2]) * 60 + int(text[3:])


def test_inconsistent_unread_scores_lower():
  env = _env()
  spec, state = env.reset(4)
  step, obj = _take(env, state, 'email_list_inbox()')
  obj["messages"][0]["read"] = not obj["messages"][0]["read"]
  assert env.state_check(spec, step, _text(obj, step)) < 1.0
  assert env.state_check(spec, step, step.next_state) == 1.0


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
  _, state = env.reset(11, steer="")
  monday, date = env._week[0], env._week[2]
  seen, _ = _take(env, state, toolcall.format_tool_call("calendar_list_events", {"date": monday}))
  res = env.step(toolcall.format_tool_call("calendar_list_events", {"date": date}))
  day = env._day(date)
  assert res.checks.fields["count"] == str(len(day))
  assert res.checks.fields["busy_minutes"] == str(sum(e.end - e.start for e in day))
  assert res.checks.fields["total_events"] == str(env._total)
  assert set(e.id for e in day) <= set(res.checks.must_include)
  # Ids the agent saw on Monday are excluded; ids of days never listed are
  # not asked about, as the agent cannot know where they are.
  monday_ids = [e.id for e in env._day(monday)]
  assert set(monday_ids) == set(res.checks.must_exclude)
  assert not any(i in res.next_state for i in monday_ids)


# ---------------------------------------------------- determined vs revealed


def test_first_looks_are_revealed_and_second_looks_determined():
  env = _env()
  spec, state = env.reset(2, steer="")
  date = env._week[1]
  lists = toolcall.format_tool_call("calendar_list_events", {"date": date})
  first, _ = _take(env, state, lists)
  again, _ = _take(env, first.next_state, lists)
  assert {"count", "busy_minutes"} <= set(first.checks.revealed)
  assert again.checks.revealed == () and again.next_state == first.next_state
  inbox, _ = _take(env, again.next_state, "email_list_inbox()")
  message = json.loads(inbox.next_state.rsplit("\n", 1)[0])["messages"][0]["id"]
  read = toolcall.format_tool_call("email_read", {"message_id": message})
  first_read, _ = _take(env, inbox.next_state, read)
  second_read, _ = _take(env, first_read.next_state, read)
  body = first_read.checks.must_include[0]
  assert first_read.checks.is_revealed_include(body)
  assert not second_read.checks.is_revealed_include(body)
  assert "count" in inbox.checks.revealed and "unread" not in inbox.checks.revealed


def test_outcome_on_an_unlisted_day_is_revealed_and_on_a_listed_day_determined():
  env = _env()
  spec, state = env.reset(6, steer="")
  date, email = env._week[3], env._task.person
  create = toolcall.format_tool_call("calendar_create_event", {
      "title": "Probe", "date": date, "start": "19:00", "end": "19:30", "attendees": [email]})
  blind, _ = _take(env, state, create)
  assert {"status", "id", "total_events"} <= set(blind.checks.revealed)
  listed, _ = _take(env, blind.next_state, toolcall.format_tool_call(
      "calendar_list_events", {"date": date}))
  again = toolcall.format_tool_call("calendar_create_event", {
      "title": "Probe two", "date": date, "start": "19:30", "end": "20:00", "attendees": [email]})
  known, obj = _take(env, listed.next_state, again)
  assert obj["status"] == 201 and set(known.checks.revealed) == {"id"}


def test_wrong_revealed_fact_fails_pass_all_only():
  env = _env()
  spec, state = env.reset(3, steer="")
  step, obj = _take(env, state, toolcall.format_tool_call(
      "calendar_list_events", {"date": env._week[0]}))
  titles = {e["title"] for e in obj["events"]}
  obj["events"][0]["title"] = next(t for t in ("Retro", "Standup", "Vendor call", "Board prep",
                                               "All hands") if t not in titles)
  obj["events"][0]["id"] = "ev199"
  result = env.check(spec, step, _text(obj, step))
  assert result.passed and not result.passed_all
  assert not all(result.revealed.values()) and result.score == 1.0


def test_wrong_determined_fact_fails():
  env = _env()
  spec, state = env.reset(3, steer="")
  step, obj = _take(env, state, toolcall.format_tool_call(
      "calendar_list_events", {"date": env._week[0]}))
  footer = step.next_state.rsplit("\n", 1)[1]
  total = step.checks.fields["total_events"]
  wrong_total = step.next_state.replace(f"total_events: {total}", f"total_events: {int(total) + 1}")
  wrong_date = _text(dict(obj, date=env._week[1]), step)
  for text in (wrong_total, wrong_date, json.dumps(obj) + "\n" + footer.replace("[", "[x")):
    assert not env.check(spec, step, text).passed
  # Creating on a listed day: every fact but the new id follows.
  create = toolcall.format_tool_call("calendar_create_event", {
      "title": "Probe", "date": env._week[0], "start": "19:00", "end": "19:30",
      "attendees": [env._task.person]})
  made, obj = _take(env, step.next_state, create)
  assert obj["status"] == 201 and env.check(spec, made, made.next_state).passed_all
  assert not env.check(spec, made, _text(dict(obj, day_events=obj["day_events"] + 1), made)).passed


def test_constraint_violations_in_invented_content_fail():
  env = _env()
  spec, state = env.reset(5, steer="")
  step, obj = _take(env, state, toolcall.format_tool_call(
      "calendar_list_events", {"date": env._week[2]}))
  assert step.checks.is_revealed_field("count")
  event = obj["events"][0]
  invented = (
      dict(event, start="10:07"),  # off the 15-minute grid
      dict(event, end=event["start"]),  # ends as it starts
      dict(event, id="meeting-1"),  # not an event id
      dict(event, attendees=["zed@elsewhere.com"]),  # not a contact's form
  )
  for bad in invented:
    variant = dict(obj, events=[bad] + obj["events"][1:])
    variant["busy_minutes"] = sum(_minutes(e["end"]) - _minutes(e["start"])
                                  for e in variant["events"] if e["start"] != "10:07")
    assert not env.check(spec, step, _text(variant, step)).passed, bad
  # Contacts a search invents must match the query and be the world's people.
  search, found = _take(env, step.next_state, toolcall.format_tool_call(
      "contacts_search", {"query": env._contacts[0].team}))
  assert search.checks.is_revealed_field("count")
  stranger = {"name": "Zed Smith", "email": "zed.smith@acme.io", "team": "design"}
  off_query = dict(found["contacts"][0], team="nowhere")
  for people in ([stranger], [off_query], found["contacts"] * 2):
    text = _text(dict(found, contacts=people, count=len(people)), search)
    assert not env.check(spec, search, text).passed
  # A created event's id must be new.
  create = toolcall.format_tool_call("calendar_create_event", {
      "title": "Probe", "date": env._week[4], "start": "19:00", "end": "19:30",
      "attendees": [env._task.person]})
  made, obj = _take(env, search.next_state, create)
  reused = dict(obj, event=dict(obj["event"], id=event["id"]))
  assert env.check(spec, made, made.next_state).passed
  assert not env.check(spec, made, _text(reused, made)).passed


def test_twin_world_passes_the_original_checks():
  passed = total = differs = 0
  for ep, twin in ((ep, twin_next_states(ep)) for seed in range(12)
                   for ep in (_episode(seed, p)[1] for p in ("expert", "noisy", "random"))):
    for step, state in zip(ep.steps, twin):
      passed += CalendarAppsEnv.check(ep.spec, step, state).passed
      total += 1
      # A step with nothing revealed is reproduced exactly; fork_hidden
      # re-draws what a step reveals for the first time.
      if not step.checks.revealed:
        assert state == step.next_state, step.action
      differs += state != step.next_state
  assert total > 200 and passed / total >= 0.99 and differs > 20


def test_fork_keeps_what_was_revealed_and_redraws_the_rest():
  env = _env()
  _, state = env.reset(7, steer="")
  listed, _ = _take(env, state, toolcall.format_tool_call(
      "calendar_list_events", {"date": env._week[0]}))
  redrawn = 0
  for date in env._week[1:]:
    for name in ("twin1", "twin2"):
      twin = copy.deepcopy(env)
      twin.fork_hidden(name)
      assert twin.step(toolcall.format_tool_call(
          "calendar_list_events", {"date": env._week[0]})).next_state == listed.next_state
      other = toolcall.format_tool_call("calendar_list_events", {"date": date})
      redrawn += twin.step(other).next_state != copy.deepcopy(env).step(other).next_state
  assert redrawn >= 6
