"""ALFWorld-style adapter: offline game synthesis, cache, planner expert, facts, errors.

Games are synthesized into a per-test cache; each reset loads one into
TextWorld's PDDL engine (~1-3 s), so only one episode runs in the default set.
"""

import json
import random
import re
import sys

import pytest

pytest.importorskip("alfworld")
pytest.importorskip("fast_downward")

from alfworld.gen import constants  # noqa: E402

from mdlm_wm.data import schema  # noqa: E402
from mdlm_wm.envs.adapters import alfworld_env as alf  # noqa: E402
from mdlm_wm.envs.adapters import make, tasks  # noqa: E402
from mdlm_wm.envs.base import run_episode  # noqa: E402

_STATUS = re.compile(r"\[location: [^|\]]+ \| holding: [^|\]]+ \| open: [^|\]]+ \| .+\]$")


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
  monkeypatch.setenv(alf.CACHE_ENV, str(tmp_path))
  return tmp_path


def _expert_episode(env, seed):
  """Plays the expert and checks what every expert episode must satisfy."""
  ep, stats = run_episode(env, seed, "expert")
  assert stats.success and stats.failed_actions == 0, (env.name, seed)
  assert [s.reward for s in ep.steps] == [0.0] * (len(ep.steps) - 1) + [1.0]
  assert [s.done for s in ep.steps] == [False] * (len(ep.steps) - 1) + [True]
  assert ep.spec.initial_state == ep.steps[0].state
  assert "middle of the room" in ep.spec.initial_state
  assert f"Your task is to: {ep.spec.task}." in ep.spec.initial_state
  for step in ep.steps:
    assert _STATUS.search(step.next_state), step.next_state
    assert env.state_check(ep.spec, step, step.next_state) == 1.0
  assert schema.episode_from_dict(schema.episode_to_dict(ep)) == ep
  return ep


def test_tasks_and_splits():
  assert tasks("alfworld") == sorted(alf.TASK_TYPES) == [
      "look_at_obj_in_light", "pick_and_place_simple", "pick_clean_then_place_in_recep",
      "pick_cool_then_place_in_recep", "pick_heat_then_place_in_recep", "pick_two_obj_and_place"]
  env = make("alfworld/pick_and_place_simple")
  splits = {s: env.split_seeds(s) for s in ("train", "valid", "test")}
  assert splits == {"train": list(range(8000)), "valid": list(range(8000, 9000)),
                    "test": list(range(9000, 10000))}
  with pytest.raises(ValueError, match="seeds 0..9999; got 10000"):
    env.reset(10_000)
  with pytest.raises(KeyError, match="unknown alfworld task"):
    make("alfworld/pick_and_place_with_movable_recep")


def test_test_games_use_alfreds_unseen_floor_plans():
  for task in alf.TASK_TYPES:
    for seed in (0, 1, 7999, 8000, 8999):
      scene = alf.synthesize(task, seed)["mdlm_wm"]["scene"]
      assert int(scene.removeprefix("FloorPlan")) in constants.TRAIN_SCENE_NUMBERS
    for seed in (9000, 9999):
      scene = alf.synthesize(task, seed)["mdlm_wm"]["scene"]
      assert int(scene.removeprefix("FloorPlan")) in constants.TEST_SCENE_NUMBERS
  # Heating needs a microwave, so only kitchens; every split has some.
  assert all(alf._scenes("pick_heat_then_place_in_recep", s) for s in ("train", "test"))
  assert set(alf._scenes("pick_heat_then_place_in_recep", "test")) == set(range(1, 7))


def test_synthesis_is_deterministic_and_follows_alfreds_constraints():
  game = alf.synthesize("pick_heat_then_place_in_recep", 11)
  assert game == alf.synthesize("pick_heat_then_place_in_recep", 11)
  assert game != alf.synthesize("pick_heat_then_place_in_recep", 12)
  meta = game["mdlm_wm"]
  obj, parent = meta["object_target"], meta["parent_target"]
  assert obj in constants.VAL_ACTION_OBJECTS["Heatable"]
  assert obj in constants.VAL_RECEPTACLE_OBJECTS[parent] and parent != "Microwave"
  assert meta["goal"] in {t.format(obj=obj.lower(), recep=parent.lower())
                          for t in ("put a hot {obj} in {recep}",
                                    "heat some {obj} and put it in {recep}")}
  problem = game["pddl_problem"]
  # ALFRED's PDDL id mangling, and the task type's goal from the goal library.
  assert "_bar_" in problem and "|" not in problem and "(isHot ?o)" in problem
  assert f"(objectType ?o {obj}Type)" in problem and f"(receptacleType ?r {parent}Type)" in problem
  # No target object starts in the microwave or in a receptacle of the target type.
  starts = re.findall(rf"\(inReceptacle ({obj}_bar_\d+) (\w+?)_bar_", problem)
  assert starts and all(r not in ("Microwave", parent) for _, r in starts)


def test_game_files_are_cached_whole(cache):
  path = alf.game_file("look_at_obj_in_light", 3)
  assert path == cache / f"v{alf.GENERATOR_VERSION}" / "look_at_obj_in_light" / "3.tw-pddl"
  data = json.loads(path.read_text())
  assert set(data) == {"pddl_domain", "grammar", "pddl_problem", "mdlm_wm"}
  assert "UNKNOWN GOAL" not in data["grammar"] and data["mdlm_wm"]["toggle_target"] == "DeskLamp"
  mtime = path.stat().st_mtime_ns
  assert alf.game_file("look_at_obj_in_light", 3) == path and path.stat().st_mtime_ns == mtime
  assert [p.name for p in path.parent.iterdir()] == ["3.tw-pddl"]  # no temporary left


def test_round_trip_rewards_checks_and_errors():
  env = make("alfworld/pick_and_place_simple")
  argv = list(sys.argv)
  ep = _expert_episode(env, 0)
  assert sys.argv == argv  # Fast Downward's translator overwrites it; the adapter restores it.
  assert ep.steps[-1].checks.fields["placed"] == "1/1"
  assert ep.steps[0].checks.fields["placed"] == "0/1"
  take = next(s for s in ep.steps if s.action.startswith("take "))
  held = take.action.removeprefix("take ").split(" from ")[0]
  assert take.checks.fields["holding"] == held and take.next_state.startswith("You pick up the")
  # A wrong fact in a prediction fails its check.
  wrong = take.next_state.replace(f"holding: {held}", "holding: nothing")
  assert env.state_check(ep.spec, take, wrong) < 1.0

  spec, first = env.reset(0)
  assert first == ep.spec.initial_state and first.endswith("| placed: 0/1]")
  for bad in ("fly to the moon", "Go to cabinet 1", "take unicorn 1 from cabinet 1", "",
              env.invalid_action(random.Random(0))):
    res = env.step(bad)
    assert not res.valid and res.reward == 0.0 and not res.done
    assert res.next_state == ("Nothing happens.\n[location: middle of the room | "
                              "holding: nothing | open: none | placed: 0/1]")
    assert res.checks.must_include == ("Nothing happens.",)
    assert env.state_check(spec, schema.Step("", bad, res.next_state, checks=res.checks),
                           res.next_state) == 1.0
  # The engine's admissible commands are exactly the valid ones.
  admissible = env.admissible_actions()
  assert "look" in admissible and "inventory" in admissible and len(admissible) > 5
  assert env.step(admissible[0]).valid
  env.close()


@pytest.mark.slow
@pytest.mark.parametrize("task", alf.TASK_TYPES)
def test_every_task_type_expert_succeeds(task):
  env = make(f"alfworld/{task}")
  for seed in (1, 8001, 9001):
    ep = _expert_episode(env, seed)
    last = ep.steps[-1].checks.fields
    if task == "look_at_obj_in_light":
      assert last["lamp"] == "on" and last["holding"] != "nothing"
    else:
      assert last["placed"] == ("2/2" if task == "pick_two_obj_and_place" else "1/1")
    if task in alf._DEVICE:
      state = alf._DEVICE[task][1]
      assert ep.steps[0].checks.fields[state] == "none" and last[state] != "none"


@pytest.mark.slow
def test_same_seed_same_episode():
  eps = [run_episode(make("alfworld/pick_two_obj_and_place"), 5, policy)[0]
         for policy in ("expert", "expert", "noisy", "noisy")]
  assert eps[0] == eps[1] and eps[2] == eps[3]
  assert eps[0].spec == eps[2].spec


@pytest.mark.slow
def test_noisy_detours_still_succeed_and_random_actions_are_admissible():
  env = make("alfworld/pick_two_obj_and_place")
  failed = 0
  for seed in range(3):
    ep, stats = run_episode(env, seed, "noisy")
    assert stats.success, seed
    failed += stats.failed_actions
    for step in ep.steps:
      assert env.state_check(ep.spec, step, step.next_state) == 1.0
  assert failed > 0  # the detours did happen
  ep, stats = run_episode(env, 0, "random", max_steps=15)
  assert stats.failed_actions == 0 and len(ep.steps) == 15


def test_checks_grade_determined_facts_and_constrain_revealed_ones():
  env = make("alfworld/pick_heat_then_place_in_recep")
  spec, state = env.reset(3)
  steps = []
  for action in ("go to diningtable 1", "take tomato 1 from diningtable 1"):
    res = env.step(action)
    steps.append(schema.Step(state, action, res.next_state, checks=res.checks))
    state = res.next_state
  env.close()
  arrive, take = steps
  for step in steps:
    assert env.check(spec, step, step.next_state).passed_all
  # The table's objects and the microwave beside it are first seen.
  assert arrive.next_state.startswith("You arrive at diningtable 1. On the diningtable 1, you see "
                                      "a apple 1, and a tomato 1.\n[location: diningtable 1, "
                                      "microwave 1 |")
  assert arrive.checks.revealed == ("apple 1", "tomato 1", "location")
  for old, new in (("a apple 1, and a tomato 1", "a bread 2"),
                   ("location: diningtable 1, microwave 1", "location: diningtable 1")):
    result = env.check(spec, arrive, arrive.next_state.replace(old, new))
    assert result.passed and not result.passed_all, (old, result.failures())
  # Invented content must be of the world's kinds, listed once, at the receptacle gone to.
  for old, new, failure in (
      ("a apple 1", "a unicorn 1", "objects:known"),
      ("a tomato 1", "a apple 1", "objects:distinct"),
      ("microwave 1 |", "spaceship 1 |", "location:receptacles"),
      ("location: diningtable 1, microwave 1", "location: microwave 1", "location:target"),
      ("location: diningtable 1, microwave 1", "location: middle of the room", "location:new")):
    result = env.check(spec, arrive, arrive.next_state.replace(old, new))
    assert f"constraint:{failure}" in result.failures(), (old, result.failures())
  wrong = take.next_state.replace("holding: tomato 1", "holding: nothing")
  assert env.check(spec, take, wrong).failures() == ["determined:field:holding"]
