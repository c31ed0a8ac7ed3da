"""The shop environment: determinism, expert quality, checks that hold and that bite, steers,
and fairness: revealed facts never fail `passed`, determined ones and broken constraints do, and
a twin world that re-draws every hidden fact passes the original checks."""

import copy
import dataclasses
import json
import random

import pytest

from mdlm_wm.checks import generic
from mdlm_wm.data import schema
from mdlm_wm.envs.base import run_episode
from mdlm_wm.envs.shop import (KINDS, PRICES, STEER_DISCOUNT, STEER_FLAKY, STEER_INTERCEPT,
                               STEER_OOS, TAIL, ShopEnv)
from mdlm_wm.envs.toolcall import format_tool_call
from mdlm_wm.envs.twin import twin_next_states


def _episodes(seeds, policies=("expert", "noisy", "random")):
  env = ShopEnv()
  for seed in seeds:
    for policy in policies:
      yield run_episode(env, seed, policy)[0]


def _step_with_items(min_items=2):
  """A reference cart step listing at least `min_items` lines."""
  for ep in _episodes(range(40), ("expert",)):
    for s in ep.steps:
      body = json.loads(s.next_state)
      items = body.get("items", [])
      if "order_id" not in body and len(items) >= min_items and "qty" in items[0]:
        return ep.spec, s
  raise AssertionError("no cart step with enough items")


def _result(env, action):
  res = env.step(action)
  return res, json.loads(res.next_state)


def test_same_seed_and_actions_give_identical_episodes():
  for seed in range(10):
    a = schema.episode_to_dict(run_episode(ShopEnv(), seed, "noisy")[0])
    b = schema.episode_to_dict(run_episode(ShopEnv(), seed, "noisy")[0])
    assert a == b
  other = schema.episode_to_dict(run_episode(ShopEnv(), 1, "noisy")[0])
  assert other != schema.episode_to_dict(run_episode(ShopEnv(), 2, "noisy")[0])


def test_expert_solves_at_least_95_percent():
  env = ShopEnv()
  wins = sum(run_episode(env, seed, "expert")[1].success for seed in range(50))
  assert wins >= 48


def test_noisy_policy_mostly_succeeds():
  env = ShopEnv()
  wins = sum(run_episode(env, seed, "noisy")[1].success for seed in range(50))
  assert wins >= 40


def test_reference_next_states_score_one_and_stay_short():
  for ep in _episodes(range(30)):
    for s in ep.steps:
      assert len(s.next_state) <= 1000, s.next_state
      assert generic.check_score(s.checks, s.next_state) == 1.0, (s.action, s.next_state)
      assert ShopEnv.state_check(ep.spec, s, s.next_state) == 1.0, (s.action, s.next_state)
      assert ShopEnv.check(ep.spec, s, s.next_state).passed_all, (s.action, s.next_state)
      assert list(json.loads(s.next_state))[-3:] == list(TAIL)


def test_task_kinds_and_steers_vary_with_seed():
  env = ShopEnv()
  kinds, steers = set(), []
  for seed in range(200):
    spec, obs = env.reset(seed)
    assert spec.initial_state == obs and spec.tools and 3 <= len(spec.rules) <= 8
    kinds.add(env._task.kind)
    steers.append(spec.steer)
  assert kinds == {"buy", "cancel", "replace"}
  assert set(steers) == {""} | set(ShopEnv.steers)
  assert 0.2 < sum(map(bool, steers)) / len(steers) < 0.5


def test_changed_trailing_field_scores_below_one():
  spec, step = _step_with_items()
  body = json.loads(step.next_state)
  body["cart_total"] = round(body["cart_total"] + 1.0, 2)
  bad = json.dumps(body)
  assert ShopEnv.state_check(spec, step, bad) < 1.0
  assert generic.check_score(step.checks, bad) < 1.0


def test_removed_entity_scores_below_one():
  spec, step = _step_with_items()
  body = json.loads(step.next_state)
  body["items"] = body["items"][1:]
  assert ShopEnv.state_check(spec, step, json.dumps(body)) < 1.0


def test_inconsistent_total_is_caught_beyond_the_generic_checker():
  spec, step = _step_with_items()
  body = json.loads(step.next_state)
  body["items"][0]["price"] = round(body["items"][0]["price"] + 5.0, 2)
  bad = json.dumps(body)
  assert generic.check_score(step.checks, bad) == 1.0  # every recorded fact still stated
  assert ShopEnv.state_check(spec, step, bad) < 1.0
  assert "constraint:cart_total_matches_lines" in ShopEnv.check(spec, step, bad).failures()


def _first_step(ep, tool):
  return next(s for s in ep.steps if s.action.startswith(tool + "("))


def _fresh_search():
  """(spec, step, query kind) of an unsteered buy episode's first search: its
  results are revealed."""
  ep, _ = run_episode(ShopEnv(), _buy_seed(lambda env: True), "expert", steer="")
  step = _first_step(ep, "search_products")
  return ep.spec, step, json.loads(step.action[len("search_products("):-1])["query"]


def _unused_id(spec, step):
  """A catalogue-form product id that neither the spec nor the step mentions."""
  text = spec.initial_state + step.state + step.next_state + " ".join(step.checks.must_exclude)
  return next(f"P{i}" for i in range(999, 99, -1) if f"P{i}" not in text)


def test_search_results_are_revealed_and_invented_ones_pass_but_not_pass_all():
  spec, step, kind = _fresh_search()
  assert set(step.checks.must_include) <= set(step.checks.revealed)
  assert "count" in step.checks.revealed and "cart_count" not in step.checks.revealed
  body = json.loads(step.next_state)
  lo, _ = PRICES[kind]
  body["items"] = [{"id": _unused_id(spec, step), "name": f"red {KINDS[kind][0]}",
                    "price": lo + 0.5, "stock": 7}]
  body["count"] = 1
  result = ShopEnv.check(spec, step, json.dumps(body))
  assert result.passed and not result.passed_all, result.failures()
  assert not all(result.revealed.values())


def test_repeating_a_complete_search_is_determined():
  env = ShopEnv()
  spec, _ = env.reset(0, steer="")
  kind = env._task.needs[0][0]
  first = env.step(format_tool_call("search_products", {"query": kind}))
  again = env.step(format_tool_call("search_products", {"query": kind}))
  narrower = env.step(format_tool_call("search_products", {"query": f"black {kind}"}))
  assert first.checks.revealed and first.next_state == again.next_state
  assert again.checks.revealed == () and narrower.checks.revealed == ()
  body = json.loads(again.next_state)
  body["items"], body["count"] = body["items"][:-1], body["count"] - 1
  step = schema.Step(first.next_state, format_tool_call("search_products", {"query": kind}),
                     again.next_state, checks=again.checks)
  assert not ShopEnv.check(spec, step, json.dumps(body)).passed


@pytest.mark.parametrize("breach, constraint", [
    (lambda it, kind: it.update(name="glass kettle" if kind != "kettle" else "desk lamp"),
     "names_match_query"),
    (lambda it, kind: it.update(price=0.0), "items_well_formed"),
    (lambda it, kind: it.update(price=PRICES[kind][1] + 5.0), "items_well_formed"),
    (lambda it, kind: it.update(id="X12"), "items_well_formed"),
    (lambda it, kind: it.update(stock=-1), "items_well_formed"),
])
def test_invented_search_results_must_satisfy_the_catalogue_rules(breach, constraint):
  spec, step, kind = _fresh_search()
  body = json.loads(step.next_state)
  breach(body["items"][0], kind)
  result = ShopEnv.check(spec, step, json.dumps(body))
  assert all(result.determined.values())  # only invented content is wrong
  assert not result.passed and f"constraint:{constraint}" in result.failures()


def test_search_count_and_order_must_match_the_listed_items():
  spec, step, _ = _fresh_search()
  body = json.loads(step.next_state)
  body["count"] += 1
  assert "constraint:count_matches_items" in ShopEnv.check(spec, step, json.dumps(body)).failures()
  body = json.loads(step.next_state)
  body["items"].append(dict(body["items"][0], id=_unused_id(spec, step), price=0.5))
  body["count"] += 1
  failures = ShopEnv.check(spec, step, json.dumps(body)).failures()
  assert "constraint:cheapest_first" in failures


def _episode_with(tool, predicate=lambda s: True, policies=("expert", "noisy", "random")):
  for ep in _episodes(range(60), policies):
    for s in ep.steps:
      if s.action.startswith(tool + "(") and predicate(s):
        return ep.spec, s
  raise AssertionError(f"no {tool} step")


def test_invented_order_lines_pass_when_consistent_and_fail_when_not():
  spec, step = _episode_with("get_order", lambda s: "subtotal" in s.checks.revealed
                             and "order_status" not in s.checks.revealed)
  body = json.loads(step.next_state)
  body["items"] = [{"id": _unused_id(spec, step), "name": "travel mug", "price": 9.5, "qty": 2}]
  body.update(count=1, subtotal=19.0, discount=0.0, total=19.0)
  result = ShopEnv.check(spec, step, json.dumps(body))
  assert result.passed and not result.passed_all, result.failures()
  body["total"] = 25.0
  assert "constraint:total_is_subtotal_minus_discount" in ShopEnv.check(
      spec, step, json.dumps(body)).failures()
  body = json.loads(step.next_state)
  body["order_status"] = "lost"
  assert not ShopEnv.check(spec, step, json.dumps(body)).passed  # a known status is determined


def test_a_new_order_id_is_revealed_but_must_be_new():
  spec, step = _episode_with("checkout", lambda s: "order_id" in s.checks.revealed
                             and s.checks.fields["status"] == "201", ("expert",))
  body = json.loads(step.next_state)
  body["order_id"] = f"O{int(body['order_id'][1:]) + 7}"
  assert ShopEnv.check(spec, step, json.dumps(body)).passed
  body["order_id"] = "O1000"  # below an id the spec shows
  spec_with_id = dataclasses.replace(spec, task=spec.task + " (see order O1001)")
  result = ShopEnv.check(spec_with_id, step, json.dumps(body))
  assert "constraint:new_order_id_is_new" in result.failures()


def test_listed_orders_must_agree_with_open_orders():
  spec, step = _episode_with("list_orders", lambda s: "count" in s.checks.revealed)
  body = json.loads(step.next_state)
  body["orders"] = [dict(o, order_status="pending") for o in body["orders"]]
  body["open_orders"] = sum(o["order_status"] == "pending" for o in body["orders"])
  result = ShopEnv.check(spec, step, json.dumps(body))
  assert not result.passed and "constraint:pending_matches_open_orders" not in result.failures()
  assert "determined:field:open_orders" in result.failures()
  body = json.loads(step.next_state)
  body["orders"][0]["order_status"] = "pending" if body["orders"][0]["order_status"] != "pending" \
      else "shipped"
  assert "constraint:pending_matches_open_orders" in ShopEnv.check(
      spec, step, json.dumps(body)).failures()


def test_cart_after_adding_a_searched_product_is_determined():
  spec, step = _episode_with("add_to_cart", lambda s: s.checks.fields["status"] == "200"
                             and not s.checks.revealed, ("expert",))
  for key, change in (("cart_count", 1), ("cart_total", 1.0), ("open_orders", 1)):
    body = json.loads(step.next_state)
    body[key] += change
    result = ShopEnv.check(spec, step, json.dumps(body))
    assert not result.passed and f"determined:field:{key}" in result.failures()


def test_adding_an_unseen_product_reveals_the_outcome():
  spec, step = _episode_with("add_to_cart", lambda s: "status" in s.checks.revealed
                             and s.checks.fields["status"] == "200")
  prev = json.loads(step.state)
  failed = {"status": 404, "error": "unknown product 'P000'",
            **{k: prev[k] for k in TAIL}}
  result = ShopEnv.check(spec, step, json.dumps(failed))
  assert result.passed and not result.passed_all, result.failures()
  failed["cart_count"] += 1  # a failed call changes nothing
  assert "constraint:failed_call_changes_nothing" in ShopEnv.check(
      spec, step, json.dumps(failed)).failures()


def test_error_statuses_of_bad_calls_are_determined():
  env = ShopEnv()
  rng = random.Random(1)
  seen = set()
  for seed in range(10):
    spec, state = env.reset(seed)
    for _ in range(4):
      action = env.invalid_action(rng)
      res = env.step(action)
      if res.checks.is_revealed_field("status"):
        continue
      seen.add(res.checks.fields["status"])
      step = schema.Step(state, action, res.next_state, checks=res.checks)
      body = json.loads(res.next_state)
      body["status"] = 200
      failures = ShopEnv.check(spec, step, json.dumps(body)).failures()
      assert "determined:field:status" in failures, action
      # A call that fails its schema (or names no tool) has one possible answer.
      if res.checks.fields["status"] in ("400", "422"):
        assert "constraint:status_allowed" in failures, action
      state = res.next_state
  assert {"400", "404", "422"} <= seen


def test_twin_world_passes_the_original_checks():
  passed = total = 0
  for ep in _episodes(range(12)):
    for step, twin in zip(ep.steps, twin_next_states(ep)):
      total += 1
      passed += ShopEnv.check(ep.spec, step, twin).passed
  assert passed / total >= 0.99, passed / total


def test_fork_hidden_redraws_only_what_no_state_showed():
  redrawn = same = 0
  for ep in _episodes(range(12)):
    for step, twin in zip(ep.steps, twin_next_states(ep)):
      if step.checks.revealed:
        redrawn += twin != step.next_state
      else:  # nothing hidden in this answer: the twin gives it word for word
        assert twin == step.next_state, (step.action, step.next_state, twin)
        same += 1
  assert redrawn > 20 and same > 20
  ep = next(_episodes([3], ("random",)))
  assert twin_next_states(ep) == twin_next_states(ep)  # the twin stream is deterministic
  assert twin_next_states(ep, twin=2) != twin_next_states(ep)


def test_fork_keeps_searched_products_and_redraws_the_others():
  env = ShopEnv()
  env.reset(0, steer="")
  kind = env._task.needs[0][0]
  env.step(format_tool_call("search_products", {"query": kind}))
  shown = {pid: copy.deepcopy(p) for pid, p in env._w.products.items() if p.kind == kind}
  twin = copy.deepcopy(env)
  twin.fork_hidden("twin1")
  assert {pid: p for pid, p in twin._w.products.items() if p.kind == kind} == shown
  others = {pid for pid, p in env._w.products.items() if p.kind != kind}
  assert others != {pid for pid, p in twin._w.products.items() if p.kind != kind}


@pytest.mark.parametrize("garbage", ["", "hello", "{", "[1, 2]", "null", '{"status": "x"}',
                                     bytes(range(256)).decode("latin-1"), "\x00\xff{}]",
                                     "[" * 100000, '{"items": [{"price": 1' + "0" * 400 + '}]}',
                                     '{"items": "abc", "count": 3, "orders": 5}'])
def test_state_check_on_garbage_is_low_and_never_raises(garbage):
  spec, step = _step_with_items(1)
  score = ShopEnv.state_check(spec, step, garbage)
  assert isinstance(score, float) and 0.0 <= score < 0.5
  assert not ShopEnv.check(spec, step, garbage).passed


def test_invalid_actions_fail_with_an_error_and_change_nothing():
  env = ShopEnv()
  rng = random.Random(0)
  for seed in range(30):
    env.reset(seed)
    for _ in range(6):
      before = copy.deepcopy(env._w)
      action = env.invalid_action(rng)
      res, body = _result(env, action)
      assert not res.valid and not res.done, action
      assert body["status"] >= 400 and body["error"], action
      assert env._w == before, action
      env.step(env.expert_action())


def test_argument_errors_come_from_the_tool_schema():
  env = ShopEnv()
  env.reset(4, steer="")
  pid = next(iter(env._w.products))
  _, body = _result(env, format_tool_call("add_to_cart", {"product_id": pid, "quantity": "two"}))
  assert body["status"] == 400 and body["error"] == "argument 'quantity' must be integer"
  _, body = _result(env, format_tool_call("checkout", {"payment_method": "cash"}))
  assert body["error"] == "argument 'payment_method' must be one of ['card', 'paypal', 'gift_card']"
  _, body = _result(env, format_tool_call("track_package", {}))
  assert body["status"] == 422
  _, body = _result(env, format_tool_call("get_order", {"order_id": "O0001"}))
  assert body["status"] == 404


def _buy_seed(predicate):
  """The first seed whose (unsteered) task is a purchase and satisfies predicate(env)."""
  env = ShopEnv()
  for seed in range(200):
    env.reset(seed, steer="")
    if env._task.kind != "cancel" and predicate(env):
      return seed
  raise AssertionError("no suitable seed")


def test_out_of_stock_steer_empties_the_cheapest_product_and_expert_still_buys():
  def cheapest(env):
    return env._kind_by_price(env._task.needs[0][0])[0]

  seed = _buy_seed(lambda env: cheapest(env).stock > 0)
  outcomes = {}
  for steer in ("", STEER_OOS):
    env = ShopEnv()
    env.reset(seed, steer=steer)
    pid = cheapest(env).id
    res = env.step(format_tool_call("get_product", {"product_id": pid}))
    add, body = _result(env, format_tool_call("add_to_cart", {"product_id": pid, "quantity": 1}))
    outcomes[steer] = (res.checks.fields["stock"], body["status"])
    assert run_episode(ShopEnv(), seed, "expert", steer=steer)[1].success
  assert outcomes[STEER_OOS] == ("0", 409)
  assert outcomes[""][0] != "0" and outcomes[""][1] == 200


def _checkout_steps(seed, steer):
  ep, stats = run_episode(ShopEnv(), seed, "expert", steer=steer)
  assert stats.success
  return [s for s in ep.steps if s.action.startswith("checkout")]


def test_discount_steer_takes_ten_percent_at_checkout():
  seed = _buy_seed(lambda env: True)
  plain = _checkout_steps(seed, "")[-1].checks.fields
  cheap = _checkout_steps(seed, STEER_DISCOUNT)[-1].checks.fields
  assert plain["discount"] == "0.0" and plain["total"] == plain["subtotal"]
  assert cheap["subtotal"] == plain["subtotal"]
  subtotal = round(float(cheap["subtotal"]) * 100)
  assert round(float(cheap["discount"]) * 100) == (subtotal + 5) // 10
  assert float(cheap["total"]) < float(plain["total"])


def test_flaky_payment_steer_fails_the_first_checkout_then_the_retry_works():
  seed = _buy_seed(lambda env: True)
  assert [s.checks.fields["status"] for s in _checkout_steps(seed, "")] == ["201"]
  flaky = _checkout_steps(seed, STEER_FLAKY)
  assert [s.checks.fields["status"] for s in flaky] == ["503", "201"]
  assert flaky[0].action == flaky[1].action


def test_intercept_steer_lets_shipped_orders_be_cancelled():
  statuses = {}
  for steer in ("", STEER_INTERCEPT):
    env = ShopEnv()
    env.reset(3, steer=steer)
    shipped = next(o.id for o in env._w.orders.values() if o.status == "shipped")
    res, body = _result(env, format_tool_call("cancel_order",
                                              {"order_id": shipped, "reason": "changed_mind"}))
    statuses[steer] = (res.checks.fields["status"], env._w.orders[shipped].status)
  assert statuses[""] == ("409", "shipped")
  assert statuses[STEER_INTERCEPT] == ("200", "cancelled")


def test_unknown_steer_is_rejected():
  with pytest.raises(ValueError):
    ShopEnv().reset(0, steer="gravity is reversed")
