"""ScienceWorld adapter: the engine's tasks and variations, gold-path expert, score
rewards, status facts, errors and determinism.

Every reset starts a JVM (~2-6 s) and loads the task, so the default set plays
one short episode; the rest are slow.
"""

import random
import re
import shutil

import pytest

pytest.importorskip("scienceworld")
if shutil.which("java") is None:
  pytest.skip("ScienceWorld needs a Java runtime", allow_module_level=True)

from mdlm_wm.data import schema  # noqa: E402
from mdlm_wm.envs.adapters import make, tasks  # noqa: E402
from mdlm_wm.envs.adapters import scienceworld_env as sw  # noqa: E402
from mdlm_wm.envs.base import run_episode  # noqa: E402

_STATUS = re.compile(r"\n\[location: ([^|\]]+) \| score: (-?\d+) \| inventory: ([^\]]+)\]$")


def _score(state):
  return int(_STATUS.search(state).group(2))


def _check_steps(env, spec, steps):
  for step in steps:
    assert _STATUS.search(step.next_state), step.next_state
    assert env.state_check(spec, step, step.next_state) == 1.0


def test_tasks_need_no_jvm():
  names = tasks("scienceworld")
  assert len(names) == 30 and names == sorted(names)
  assert {"boil", "find-animal", "test-conductivity", "use-thermometer"} <= set(names)
  assert all(re.fullmatch(r"[a-z0-9-]+", n) for n in names)
  env = make("scienceworld/boil")
  assert env.name == "scienceworld/boil" and env._engine is None
  with pytest.raises(KeyError, match="unknown scienceworld task"):
    make("scienceworld/Boil")


def test_inventory_and_location_parsing():
  inventory = ("In your inventory, you see:\n"
               "\ta battery. its anode is connected to: nothing. its cathode is connected to: "
               "nothing. \n\tan orange\n"
               "\ta orange wireits terminal 1 is connected to: nothing. \n"
               "\ta metal pot (containing a substance called water)\n"
               "\ta thermometer, currently reading a temperature of 10 degrees celsius\n")
  assert sw._inventory(inventory) == "battery, metal pot, orange, orange wire, thermometer"
  assert sw._inventory("In your inventory, you see:\n") == "nothing"
  assert sw._location("This room is called the kitchen. In it, you see: ") == "kitchen"
  assert sw._location("This outside location is called the outside. Here you see: ") == "outside"
  assert sw._task_text("Task Description:\nYour task is to boil water.") == (
      "Your task is to boil water.")


def test_round_trip_rewards_checks_and_errors():
  env = make("scienceworld/lifespan-longest-lived")
  spec, first = env.reset(0)
  assert first == spec.initial_state
  assert first.startswith("This room is called the hallway.")
  assert first.endswith("\n[location: hallway | score: 0 | inventory: orange]")
  assert spec.task.startswith("Your task is to find the animal with the longest life span.")
  assert spec.tools == () and "focus on OBJ" in spec.rules[0] and "reset task" not in spec.rules[0]

  for bad in ("fly to the moon", "", "look at\nlook around", env.invalid_action(random.Random(1))):
    res = env.step(bad)
    assert not res.valid and res.reward == 0.0 and not res.done
    assert res.next_state == ("No known action matches that input.\n"
                              "[location: hallway | score: 0 | inventory: orange]")
    assert res.checks.must_include == ("No known action matches that input.",)

  # The expert replays the gold path; the bad actions above did not derail it.
  steps, state = [], first
  while not steps or not steps[-1].done:
    action = env.expert_action()
    res = env.step(action)
    assert res.valid, action
    steps.append(schema.Step(state, action, res.next_state, res.reward, res.done, res.checks))
    state = res.next_state
  assert res.info == {"success": True, "score": 100} and len(steps) == 5
  _check_steps(env, spec, steps)
  # Rewards are score deltas / 100: the first state's score plus them is the final score.
  assert _score(first) + round(100 * sum(s.reward for s in steps)) == _score(state) == 100
  assert [s.checks.fields["location"] for s in steps] == [
      "hallway", "greenhouse", "greenhouse", "outside", "outside"]
  wrong = state.replace("location: outside", "location: kitchen")
  assert env.state_check(spec, steps[-1], wrong) < 1.0
  assert "look around" in env.admissible_actions()
  env.close()
  assert env._engine is None


@pytest.mark.slow
def test_failure_is_score_minus_100():
  env = make("scienceworld/lifespan-longest-lived")
  env.reset(0)
  res = env.step("focus on air")
  assert res.valid and res.done and res.reward == -1.0
  assert res.info == {"success": False, "score": -100}
  assert res.next_state.endswith("| score: -100 | inventory: orange]")
  env.close()


@pytest.mark.slow
def test_splits_are_the_engines_variations():
  env = make("scienceworld/boil")
  splits = {s: env.split_seeds(s) for s in ("train", "valid", "test")}
  assert [len(splits[s]) for s in ("train", "valid", "test")] == [14, 7, 9]
  assert sorted(sum(splits.values(), [])) == list(range(30))
  with pytest.raises(ValueError, match="variations 0..29; got seed 30"):
    env.reset(30)
  env.close()


@pytest.mark.slow
def test_same_seed_same_episode():
  # The gold path of find-non-living-thing picks a random object: the JVM's
  # generator is seeded per reset, and each reset gets a fresh JVM.
  env = make("scienceworld/find-non-living-thing")
  eps = [run_episode(env, 2, "expert")[0] for _ in range(2)]
  other = make("scienceworld/find-non-living-thing")
  eps.append(run_episode(other, 2, "expert")[0])
  assert eps[0] == eps[1] == eps[2]
  assert eps[0].meta["success"]
  env.close()
  other.close()


@pytest.mark.slow
def test_reused_jvm_is_started_once():
  env = sw.ScienceWorldEnv("lifespan-shortest-lived", reuse_jvm=True)
  episodes = []
  for seed in (0, 1):
    episodes.append(run_episode(env, seed, "expert")[0])
    if seed == 0:
      engine = env._engine
  assert env._engine is engine
  assert all(ep.meta["success"] for ep in episodes)
  env.close()


@pytest.mark.slow
@pytest.mark.parametrize("task, seed", [("boil", 0), ("find-plant", 75),
                                        ("test-conductivity", 3)])
def test_expert_succeeds_and_every_step_passes_its_checks(task, seed):
  env = make(f"scienceworld/{task}")
  ep, stats = run_episode(env, seed, "expert")
  assert stats.success and stats.failed_actions == 0
  _check_steps(env, ep.spec, ep.steps)
  assert _score(ep.spec.initial_state) + round(100 * sum(s.reward for s in ep.steps)) == 100
  env.close()


@pytest.mark.slow
def test_noisy_and_random_policies():
  env = make("scienceworld/lifespan-longest-lived")
  ep, stats = run_episode(env, 1, "noisy", noise=0.5)
  _check_steps(env, ep.spec, ep.steps)
  assert stats.failed_actions > 0
  ep, stats = run_episode(env, 1, "random", max_steps=10)
  _check_steps(env, ep.spec, ep.steps)
  # Random actions come from the engine's valid action/object combinations, some
  # of which its own parser rejects (e.g. "dunk X into Y"; its template is "dunk OBJ in OBJ").
  assert 0 < stats.failed_actions < len(ep.steps) == 10
  assert any(s.action.startswith("dunk ") and "No known action" in s.next_state for s in ep.steps)
  env.close()


@pytest.mark.slow
@pytest.mark.parametrize("task", sw.ScienceWorldEnv.tasks())
def test_every_task_resets_and_takes_a_gold_step(task):
  env = make(f"scienceworld/{task}")
  spec, first = env.reset(0)
  assert spec.task.startswith("Your task is to") and _STATUS.search(first)
  res = env.step(env.expert_action())
  assert res.valid
  step = schema.Step(first, "", res.next_state, res.reward, res.done, res.checks)
  assert env.state_check(spec, step, res.next_state) == 1.0
  env.close()


def test_checks_grade_determined_facts_and_constrain_revealed_ones():
  env = make("scienceworld/boil")
  spec, state = env.reset(0)
  steps = []
  for action in ("go to kitchen", "look around", "pick up thermometer"):
    res = env.step(action)
    steps.append(schema.Step(state, action, res.next_state, checks=res.checks))
    state = res.next_state
  env.close()
  move, look, take = steps
  for step in steps:
    assert env.check(spec, step, step.next_state).passed_all
  # The move names its room; the first look around reveals the room's contents.
  assert move.checks.revealed == () and {"lighter", "stove"} <= set(look.checks.revealed)
  result = env.check(spec, look, look.next_state.replace("a lighter", "a candle"))
  assert result.passed and not result.passed_all
  # Listed things must be named, and the room described must be the status line's.
  for old, new, failure in (("\ta lighter", "\t- lighter", "objects:named"),
                            ("called the kitchen", "called the bathroom", "objects:room")):
    result = env.check(spec, look, look.next_state.replace(old, new))
    assert result.failures() == [f"constraint:{failure}"]
  assert env.check(spec, move, move.next_state.replace("location: kitchen", "location: hallway")
                   ).failures() == ["determined:field:location"]
  for old, new in (("inventory: orange, thermometer", "inventory: orange"),
                   ("score: 0", "score: 5")):
    result = env.check(spec, take, take.next_state.replace(old, new))
    assert result.failures() == [f"determined:field:{old.split(':')[0]}"]
