"""TextWorld adapter: local game generation, cache, facts, rewards, errors, determinism.

Games are generated on first use (a few seconds each with tw-make) into the
default cache (or $MDLM_WM_TEXTWORLD_CACHE), so a second run is faster.
"""

import filecmp
import os
import re

import pytest

pytest.importorskip("textworld")

from mdlm_wm.checks.generic import check_score  # noqa: E402
from mdlm_wm.data import schema  # noqa: E402
from mdlm_wm.envs import base  # noqa: E402
from mdlm_wm.envs.adapters import make, tasks  # noqa: E402
from mdlm_wm.envs.adapters import textworld_env as tw  # noqa: E402


@pytest.fixture(scope="module")
def treasure():
  env = make("textworld/treasure_hunter")
  yield env
  env.close()


def _check_expert_episode(env, seed):
  ep, stats = base.run_episode(env, seed, "expert")
  assert stats.success and ep.steps[-1].done and stats.failed_actions == 0, (env.name, seed)
  # Rewards are deltas of TextWorld's cumulative score: they sum to the final
  # score, which is the game's maximum once won.
  final = env._state["score"]
  assert sum(s.reward for s in ep.steps) == final == env._state["max_score"] > 0
  assert ep.steps[-1].checks.fields["score"] == str(final)
  assert ep.spec.initial_state == ep.steps[0].state and ep.spec.task and len(ep.spec.rules) == 4
  for step in ep.steps:
    assert check_score(step.checks, step.next_state) == 1.0
    assert env.state_check(ep.spec, step, step.next_state) == 1.0
    # No interpreter prompt or status bar ("-= Room =-0/1") is left in the text.
    assert not re.search(r"^>|=-\d+/\d+", step.next_state, re.MULTILINE)
  assert schema.episode_from_dict(schema.episode_to_dict(ep)) == ep
  return ep


def test_tasks_and_splits():
  assert tasks("textworld") == ["coin_collector", "cooking", "simple", "treasure_hunter"]
  env = make("textworld/coin_collector")
  seeds = {s: env.split_seeds(s) for s in ("train", "valid", "test")}
  assert seeds == {"train": list(range(80)), "valid": list(range(80, 90)),
                   "test": list(range(90, 100))}
  with pytest.raises(ValueError, match="TextWorld seeds are 0..99, got 100"):
    env.reset(100)


def test_split_settings_follow_the_challenges_own_splits():
  assert tw._settings("cooking", 3)["split"] == "train"
  assert tw._settings("cooking", 85)["split"] == "valid"
  assert tw._settings("cooking", 95)["split"] == "test"
  assert (tw._settings("simple", 3)["test"], tw._settings("simple", 95)["test"]) == (False, True)


def test_treasure_hunter_round_trip(treasure):
  spec, first = treasure.reset(0)
  assert first.endswith("[location: studio | inventory: nothing | score: 0]")
  assert first.startswith("-= Studio =-")
  ep = _check_expert_episode(treasure, 0)
  assert ep.steps[-1].next_state.endswith("| score: 1]")
  # A prediction with a wrong room fails the step's checks.
  step = ep.steps[0]
  wrong = step.next_state.replace(f"location: {step.checks.fields['location']}", "location: attic")
  assert treasure.state_check(ep.spec, step, wrong) < 1.0


@pytest.mark.parametrize("action, message", [
    ("fly to the moon", "That's not a verb I recognise."),
    ("take the unicorn", "You can't see any such thing."),
    ("", "I beg your pardon?"),
    ("go nowhere\ngo north", "You can't see any such thing."),
])
def test_bad_action_gets_the_engines_error(treasure, action, message):
  treasure.reset(0)
  res = treasure.step(action)
  assert not res.valid and not res.done and res.reward == 0.0
  assert res.next_state.startswith(message) and res.checks.must_include == (message,)
  assert res.next_state.endswith("[location: studio | inventory: nothing | score: 0]")
  assert check_score(res.checks, res.next_state) == 1.0


def test_same_seed_same_episode(treasure):
  a = [base.run_episode(treasure, 0, p)[0] for p in base.POLICIES]
  b = [base.run_episode(make("textworld/treasure_hunter"), 0, p)[0] for p in base.POLICIES]
  assert a == b


@pytest.mark.slow
@pytest.mark.parametrize("task", ["simple", "cooking", "treasure_hunter", "coin_collector"])
def test_expert_and_noisy_solve_train_and_test_games(task):
  env = make(f"textworld/{task}")
  for seed in (2, 91):
    expert = _check_expert_episode(env, seed)
    # The expert replans from TextWorld's winning policy after a detour.
    noisy, stats = base.run_episode(env, seed, "noisy")
    assert stats.success and len(noisy.steps) > len(expert.steps), (task, seed)
  env.close()


@pytest.mark.slow
def test_generation_is_deterministic_and_atomic(tmp_path):
  paths = [tw.game_file("coin_collector", 5, cache=str(tmp_path / name)) for name in "ab"]
  for p in paths:
    assert filecmp.cmp(paths[0], p, shallow=False)
    folder = os.path.dirname(p)
    # Only finished games are left: the .z8 and its .json, no temporary folder.
    assert sorted(os.listdir(folder)) == ["seed-5.json", "seed-5.z8"]
  assert filecmp.cmp(paths[0][:-3] + ".json", paths[1][:-3] + ".json", shallow=False)
  # A cached game is reused, not regenerated.
  mtime = os.path.getmtime(paths[0])
  assert tw.game_file("coin_collector", 5, cache=str(tmp_path / "a")) == paths[0]
  assert os.path.getmtime(paths[0]) == mtime


def test_cache_dir_follows_the_environment_variable(monkeypatch, tmp_path):
  monkeypatch.setenv(tw.CACHE_ENV, str(tmp_path))
  assert tw.cache_dir() == str(tmp_path)
  monkeypatch.delenv(tw.CACHE_ENV)
  assert tw.cache_dir().endswith(os.path.join(".cache", "mdlm_wm", "textworld"))


def test_checks_grade_determined_facts_and_constrain_revealed_ones(treasure):
  ep, _ = base.run_episode(treasure, 0, "expert")
  spec, enter, take = ep.spec, ep.steps[0], ep.steps[-1]
  # `go east` enters the laundromat: the room and its furniture are first seen.
  assert enter.action == "go east"
  assert enter.checks.revealed == ("counter", "passageway", "shelf", "location")
  assert treasure.check(spec, enter, enter.next_state).passed_all
  # Another new room with other furniture is a fair guess: it fails only pass_all.
  attic = "-= Attic =-\nYou see a chest.\n[location: attic | inventory: nothing | score: 0]"
  result = treasure.check(spec, enter, attic)
  assert result.passed and not result.passed_all
  # The room it left is not a new room; a header must name the status line's room.
  assert "constraint:location:new" in treasure.check(spec, enter, enter.state).failures()
  assert treasure.check(spec, enter, attic.replace("-= Attic", "-= Cellar")).failures() == [
      "constraint:location:named"]
  # Taking the key: inventory and score are determined.
  assert take.action == "take key" and take.checks.revealed == ()
  for old, new in (("inventory: key", "inventory: nothing"), ("score: 1", "score: 0")):
    result = treasure.check(spec, take, take.next_state.replace(old, new))
    assert not result.passed and result.failures() == [f"determined:field:{old.split(':')[0]}"]
