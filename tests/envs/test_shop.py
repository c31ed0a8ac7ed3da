"""The shop environment: determinism, expert quality, checks that hold and that bite, steers."""

import copy
import json
import random

import pytest

from mdlm_wm.checks import generic
from mdlm_wm.data import schema
from mdlm_wm.envs.base import run_episode
from mdlm_wm.envs.shop import (STEER_DISCOUNT, STEER_FLAKY, STEER_INTERCEPT, STEER_OOS, TAIL,
                               ShopEnv)
from mdlm_wm.envs.toolcall import format_tool_call


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


def test_inconsistent_search_count_scores_below_one():
  env = ShopEnv()
  spec, _ = env.reset(0, steer="")
  res = env.step(format_tool_call("search_products", {"query": env._task.needs[0][0]}))
  step = schema.Step(state="", action="", next_state=res.next_state, checks=res.checks)
  body = json.loads(res.next_state)
  body["items"].append(dict(body["items"][0]))
  assert ShopEnv.state_check(spec, step, json.dumps(body)) < 1.0


@pytest.mark.parametrize("garbage", ["", "hello", "{", "[1, 2]", "null", '{"status": "x"}',
                                     bytes(range(256)).decode("latin-1"), "\x00\xff{}]",
                                     "[" * 100000, '{"items": [{"price": 1' + "0" * 400 + '}]}',
                                     '{"items": "abc", "count": 3, "orders": 5}'])
def test_state_check_on_garbage_is_low_and_never_raises(garbage):
  spec, step = _step_with_items(1)
  score = ShopEnv.state_check(spec, step, garbage)
  assert isinstance(score, float) and 0.0 <= score < 0.5


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
