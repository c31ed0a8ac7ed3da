"""Task-success predicates on state text."""

import pytest

from mdlm_wm import envs
from mdlm_wm.agents import success
from mdlm_wm.data.schema import Spec

SPEC = Spec("", "Heat an apple and put it on the sofa.")


@pytest.mark.parametrize("env,state,expected", [
    ("household", "You put the apple on the sofa. [room: hall | at: sofa | progress: 2/2]", True),
    ("household", "You take the apple. [room: hall | at: sofa | progress: 1/2]", False),
    ("household", "You take the apple.", False),
    ("household", "[room: hall | progress: 0/0]", False),
    ("files", "[cwd: /home/user | entries: 6 | exit: 0 | goal: 2/2]", True),
    ("files", "[cwd: /home/user | entries: 6 | exit: 0 | goal: 1/2]", False),
    ("lab", "Done.\n[location: lab | task: done | time: 5]", True),
    ("lab", "Wrong box.\n[location: lab | task: failed | time: 5]", False),
    ("lab", "[location: lab | task: open | time: 5]", False),
    ("textworld/cooking", "You eat the meal.\n[location: kitchen | score: 3/3]", True),
    ("textworld/cooking", "You open the fridge.\n[location: kitchen | score: 1/3]", False),
    ("textworld/cooking", "[location: kitchen | won: true]", True),
    ("textworld/cooking", "*** The End ***", True),
    ("textworld/cooking", "[location: kitchen | won: false]", False),
])
def test_status_line_predicates(env, state, expected):
  assert success.default_success_fn(env)(SPEC, state) is expected


BUY = Spec("", "Buy 1 lamp for the customer in one order, paid by gift_card, with the order "
               "total at most $50 (any product of the right kind will do).")
CHECKOUT = ('{"status": 201, "order_id": "O7264", "order_status": "pending", "payment": "%s", '
            '"items": [], "count": 1, "subtotal": 22.49, "discount": 0.0, "total": %s, '
            '"cart_count": 0, "cart_total": 0.0, "open_orders": 2}')
CANCEL = Spec("", "Cancel order O1287 because the customer ordered it by mistake.")
CANCELLED = ('{"status": 200, "order_id": "%s", "order_status": "cancelled", "reason": "x", '
             '"refund": 114.0, "cart_count": 1, "cart_total": 52.98, "open_orders": 1}')
MEET = Spec("", "Email Omar Costa how many minutes of events you have on 2024-01-30.")
SENT = ('{"status": 200, "message": {"id": "s301", "to": "%s", "subject": "Busy minutes"}}\n'
        "[total_events: 10 | unread: 1 | sent: 1]")
READ = ('{"status": 200, "message": {"id": "m2", "from": "omar.costa@initech.org", '
        '"subject": "Hi"}}\n[total_events: 10 | unread: 0 | sent: 0]')


@pytest.mark.parametrize("env,spec,state,expected", [
    ("shop", BUY, CHECKOUT % ("gift_card", "22.49"), True),
    ("shop", BUY, CHECKOUT % ("card", "22.49"), False),  # wrong payment
    ("shop", BUY, CHECKOUT % ("gift_card", "50.01"), False),  # over budget
    ("shop", CANCEL, CANCELLED % "O1287", True),
    ("shop", CANCEL, CANCELLED % "O9999", False),  # another order
    ("calendar", MEET, SENT % "omar.costa@initech.org", True),
    ("calendar", MEET, SENT % "ana.tan@initech.org", False),  # someone else
    ("calendar", MEET, READ, False),  # reading an email is not sending one
])
def test_tool_call_proxies(env, spec, state, expected):
  assert success.default_success_fn(env)(spec, state) is expected


@pytest.mark.parametrize("env", ["household", "lab", "files", "shop", "calendar"])
def test_expert_episodes_succeed_exactly_at_their_last_state(env):
  fn = success.default_success_fn(env)
  for seed in range(8):
    ep, stats = envs.run_episode(envs.make(env), seed, "expert")
    assert stats.success
    judged = [fn(ep.spec, s) for s in [ep.spec.initial_state] + [s.next_state for s in ep.steps]]
    assert judged == [False] * len(ep.steps) + [True], (env, seed)


@pytest.mark.parametrize("env", ["household", "lab", "files"])
def test_exact_predicates_agree_with_the_environment_on_every_state(env):
  fn = success.default_success_fn(env)
  for policy in ("noisy", "random"):
    for seed in range(6):
      ep, _ = envs.run_episode(envs.make(env), seed, policy)
      for s in ep.steps:
        assert fn(ep.spec, s.next_state) == (s.done and s.reward > 0), (policy, seed, s.action)


def test_progress_is_the_last_fraction():
  assert success.progress("[progress: 0/2] ... [room: x | progress: 1/4]") == 0.25
  assert success.progress("[cwd: / | goal: 3/3]") == 1.0
  assert success.progress("no status") == 0.0
  assert success.progress("[progress: 1/0]") == 0.0


@pytest.mark.parametrize("env,state,expected", [
    ("textworld_express/coin", "You take the coin.\n[location: bedroom | inventory: coin, "
     "plaid blanket | score: 1]", True),
    ("textworld_express/coin", "You take the plaid blanket.\n[location: bedroom | inventory: "
     "plaid blanket | score: 0]", False),
    ("textworld_express/coin", "You see a coin.\n[location: kitchen | inventory: (empty) | "
     "score: 0]", False),  # a coin in the room is not one in hand
    ("textworld/coin_collector", "[location: bedroom | inventory: coin | score: 1]", True),
    ("textworld/coin_collector", "[location: bedroom | inventory: nothing | score: 0]", False),
])
def test_coin_tasks_are_solved_when_the_inventory_holds_the_coin(env, state, expected):
  assert success.default_success_fn(env)(SPEC, state) is expected


@pytest.mark.slow
@pytest.mark.parametrize("env", ["textworld_express/coin", "textworld/coin_collector"])
def test_coin_predicate_agrees_with_the_real_environment_on_every_state(env):
  pytest.importorskip("textworld_express" if "express" in env else "textworld")
  fn = success.default_success_fn(env)
  game = envs.make(env)
  try:
    seeds = game.split_seeds("train")[:4]
    for policy in ("expert", "noisy", "random"):
      for seed in seeds:
        ep, _ = envs.run_episode(game, seed, policy)
        for s in ep.steps:
          assert fn(ep.spec, s.next_state) == (s.done and s.reward > 0), (policy, seed, s.action)
  finally:
    game.close()


LOOK = Spec("", "look at pen under the desklamp")
EXAMINE = Spec("", "examine the alarmclock with the desklamp")
PUT = Spec("", "put a potato in sinkbasin")


@pytest.mark.parametrize("env,spec,state,expected", [
    ("alfworld/pick_and_place_simple", PUT, "You move the potato 2 to the sinkbasin 1.\n"
     "[location: sinkbasin 1 | holding: nothing | open: none | placed: 1/1]", True),
    ("alfworld/pick_and_place_simple", PUT, "You pick up the potato 2.\n"
     "[location: sinkbasin 1 | holding: potato 2 | open: none | placed: 0/1]", False),
    ("alfworld/look_at_obj_in_light", LOOK, "You turn on the desklamp 1.\n"
     "[location: desk 1 | holding: pen 2 | open: none | lamp: on]", True),
    ("alfworld/look_at_obj_in_light", LOOK, "You turn on the desklamp 1.\n"
     "[location: desk 1 | holding: pencil 1 | open: none | lamp: on]", False),  # another kind
    ("alfworld/look_at_obj_in_light", EXAMINE, "You pick up the alarmclock 1.\n"
     "[location: desk 1 | holding: alarmclock 1 | open: none | lamp: off]", False),
    ("alfworld/look_at_obj_in_light", EXAMINE, "You turn on the desklamp 1.\n"
     "[location: desk 1 | holding: alarmclock 1 | open: none | lamp: on]", True),
])
def test_alfworld_tasks_are_solved_when_placed_or_examined_in_light(env, spec, state, expected):
  assert success.default_success_fn(env)(spec, state) is expected


@pytest.mark.slow
@pytest.mark.parametrize("task", ["look_at_obj_in_light", "pick_and_place_simple",
                                  "pick_two_obj_and_place", "pick_heat_then_place_in_recep"])
def test_alfworld_predicate_agrees_with_the_real_environment_on_every_state(task):
  pytest.importorskip("textworld")
  env = f"alfworld/{task}"
  fn = success.default_success_fn(env)
  game = envs.make(env)
  try:
    for policy in ("expert", "noisy", "random"):
      for seed in game.split_seeds("train")[:3]:
        ep, _ = envs.run_episode(game, seed, policy)
        for s in ep.steps:
          assert fn(ep.spec, s.next_state) == (s.done and s.reward > 0), (policy, seed, s.action)
  finally:
    game.close()
