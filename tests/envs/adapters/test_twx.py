"""TextWorld-Express adapter: engine splits, gold-path expert, facts, errors, determinism."""

import pytest

pytest.importorskip("textworld_express")

from mdlm_wm.checks.generic import check_score  # noqa: E402
from mdlm_wm.data import schema  # noqa: E402
from mdlm_wm.envs import base  # noqa: E402
from mdlm_wm.envs.adapters import make, tasks  # noqa: E402
from mdlm_wm.envs.adapters.twx_env import TextWorldExpressEnv  # noqa: E402

GAMES = tasks("textworld_express")


@pytest.fixture(scope="module")
def envs():
  """One adapter (one JVM) per game, shared by the module's tests."""
  made = {}

  def get(game):
    if game not in made:
      made[game] = make(f"textworld_express/{game}")
    return made[game]

  yield get
  for env in made.values():
    env.close()


def test_tasks_are_the_engines_games(envs):
  env = envs("coin")
  env.split_seeds("train")  # starts the engine
  assert GAMES == sorted(env._engine.getGameNames())
  assert {"cookingworld", "twc", "coin", "mapreader", "arithmetic", "sorting", "simonsays",
          "peckingorder"} <= set(GAMES)
  with pytest.raises(KeyError, match="unknown textworld_express task 'nope'"):
    make("textworld_express/nope")


def test_splits_are_the_engine_folds_and_disjoint(envs):
  env = envs("coin")
  folds = {split: env.split_seeds(split) for split in ("train", "valid", "test")}
  assert [len(s) for s in folds.values()] == [1000, 1000, 1000]
  assert (min(folds["train"]), min(folds["valid"]), min(folds["test"])) == (0, 10000, 20000)
  assert not set(folds["train"]) & set(folds["valid"])
  assert not set(folds["valid"]) & set(folds["test"])
  assert not set(folds["train"]) & set(folds["test"])
  with pytest.raises(ValueError, match="seed 5000 is in no TWX game fold"):
    env.reset(5000)
  with pytest.raises(ValueError, match="unknown split"):
    env.split_seeds("dev")


@pytest.mark.parametrize("game", GAMES)
def test_expert_solves_and_every_reference_passes_its_checks(envs, game):
  env = envs(game)
  for seed in (env.split_seeds("train")[3], env.split_seeds("test")[3]):
    ep, stats = base.run_episode(env, seed, "expert")
    assert stats.success and ep.steps[-1].done and stats.failed_actions <= 1, (game, seed)
    # Rewards are deltas of the engine's points: they add up to its final score.
    final = env._infos["scoreRaw"]
    assert sum(s.reward for s in ep.steps) == pytest.approx(final) and final > 0
    assert ep.steps[-1].checks.fields["score"] == str(int(final))
    assert ep.spec.initial_state == ep.steps[0].state and ep.spec.task and ep.spec.rules
    for step in ep.steps:
      assert check_score(step.checks, step.next_state) == 1.0
      assert env.state_check(ep.spec, step, step.next_state) == 1.0
    assert schema.episode_from_dict(schema.episode_to_dict(ep)) == ep


def test_status_line_has_the_engines_facts(envs):
  env = envs("cookingworld")
  spec, first = env.reset(env.split_seeds("train")[0])
  assert first.endswith("[location: kitchen | inventory: nothing | score: 0]")
  res = env.step("take cookbook")
  assert res.valid and res.checks.fields == {"location": "kitchen", "inventory": "cookbook",
                                             "score": "0"}
  assert res.next_state.startswith("You take the cookbook.")
  # A prediction with a wrong fact fails the step's checks.
  wrong = res.next_state.replace("inventory: cookbook", "inventory: knife")
  assert env.state_check(spec, schema.Step("", "take cookbook", res.next_state, checks=res.checks),
                         wrong) < 1.0


def test_simonsays_has_only_a_score(envs):
  env = envs("simonsays")
  _, first = env.reset(env.split_seeds("valid")[0])
  assert first.startswith("Simon says") and first.endswith("\n[score: 0]")


@pytest.mark.parametrize("action",
                         ["fly to the moon", "", "take", "éé ü", "move north\nmove south"])
def test_bad_action_gets_the_engines_error(envs, action):
  env = envs("coin")
  env.reset(env.split_seeds("train")[1])
  res = env.step(action)
  assert not res.valid and not res.done and res.reward == 0.0
  assert res.next_state.startswith("Unknown action: I'm not sure what you mean.")
  assert res.checks.must_include == ("Unknown action: I'm not sure what you mean.",)
  assert check_score(res.checks, res.next_state) == 1.0


def _episodes(game: str, n_seeds: int) -> list[schema.Episode]:
  env = TextWorldExpressEnv(game)
  seeds = env.split_seeds("train")[:n_seeds]
  episodes = [base.run_episode(env, s, p)[0] for s in seeds for p in ("expert", "noisy")]
  env.close()
  return episodes


def test_same_seed_same_episode_across_engines():
  """TWX draws coin's gold path from an unseeded random walk: a fresh JVM
  must still give the same expert and noisy episodes."""
  assert _episodes("coin", 2) == _episodes("coin", 2)


@pytest.mark.slow
@pytest.mark.parametrize("game", ["twc", "mapreader", "cookingworld"])
def test_same_seed_same_episode_across_engines_slow(game):
  assert _episodes(game, 4) == _episodes(game, 4)


def test_noisy_expert_repairs_detours(envs):
  """The undo stack lets the expert finish after random moves and misplaced items."""
  env = envs("twc")
  wins = [base.run_episode(env, s, "noisy", noise=0.3)[1].success
          for s in env.split_seeds("train")[:10]]
  assert sum(wins) >= 8, wins


def test_checks_grade_determined_facts_and_constrain_revealed_ones(envs):
  env = envs("cookingworld")
  spec, state = env.reset(3)
  steps = []
  for action in ("open cutlery drawer", "take knife", "open door to north", "move north"):
    res = env.step(action)
    steps.append(schema.Step(state, action, res.next_state, checks=res.checks))
    state = res.next_state
  drawer, take, _, move = steps
  for step in steps:
    assert env.check(spec, step, step.next_state).passed_all
  # The drawer's contents are revealed: other contents fail only pass_all, but
  # they must be listed as noun phrases.
  assert drawer.checks.revealed == ("knife",)
  result = env.check(spec, drawer, drawer.next_state.replace("a knife", "a spoon"))
  assert result.passed and not result.passed_all
  assert env.check(spec, drawer, drawer.next_state.replace("a knife", "knife")).failures() == [
      "constraint:objects:articles"]
  # The opened door named the backyard: the room is determined, its furniture revealed.
  assert "location" not in move.checks.revealed and "barbeque" in move.checks.revealed
  assert env.check(spec, move, move.next_state.replace("a barbeque", "a grill")).passed
  wrong = move.next_state.replace("location: backyard", "location: pantry")
  assert env.check(spec, move, wrong).failures() == ["determined:field:location"]
  assert env.check(spec, take, take.next_state.replace("inventory: knife", "inventory: nothing")
                   ).failures() == ["determined:field:inventory"]


def test_close_leaves_no_py4j_shutdown_traceback(caplog):
  """TWX's engine closes itself again when collected; py4j logs the second
  shutdown of a closed gateway with a traceback (shown under absl at INFO)."""
  import gc
  import logging
  env = TextWorldExpressEnv("coin")
  env.reset(seed=0)
  with caplog.at_level(logging.INFO, logger="py4j"):
    env.close()
    del env
    gc.collect()
  assert not [r for r in caplog.records if r.exc_info], caplog.text[-2000:]
