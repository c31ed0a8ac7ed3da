"""Word2World's world-to-real protocol: WM task success, WM2Real, replay success
and single-step accuracy, with world models whose right answers are known."""

import json
import os
import subprocess
import sys

import pytest

from mdlm_wm import envs
from mdlm_wm.agents import ExpertAgent, RandomAgent
from mdlm_wm.agents import wm2real
from mdlm_wm.agents.episodes import EnvPool

ENV = "household"
TASKS = [(ENV, 900_000), (ENV, 900_001), (ENV, 900_002)]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class _Cfg:
  class data:  # pylint: disable=invalid-name
    # The oracle replays every earlier action, so its transitions keep the whole episode.
    history_len = 1000


class _OracleWorld:
  """Next states of the real game: replays the transition's actions from its seed."""
  cfg = _Cfg

  def __init__(self, tasks):
    self._seed_of = {}
    for name, seed in tasks:
      spec, _ = envs.make(name).reset(seed)
      self._seed_of[spec.initial_state] = (name, seed)
    self.calls = []

  def next_state(self, tr):
    name, seed = self._seed_of[tr.spec.initial_state]
    env = envs.make(name)
    env.reset(seed)
    for _, action in tr.history:
      env.step(action)
    return env.step(tr.action).next_state

  def generate(self, trs, *, num_samples, seed, steers=None, **overrides):
    self.calls.append(overrides)
    return [[self.next_state(tr)] * num_samples for tr in trs]


class _LyingWorld(_OracleWorld):
  """Says every task is solved after any action."""

  def generate(self, trs, *, num_samples, seed, steers=None, **overrides):
    return [["[room: hall | progress: 3/3]"] * num_samples for _ in trs]


class _CopyWorld(_OracleWorld):
  """Predicts s_t: the copy floor itself."""

  def generate(self, trs, *, num_samples, seed, steers=None, **overrides):
    return [[tr.state] * num_samples for tr in trs]


@pytest.fixture(scope="module")
def pool():
  p = EnvPool()
  yield p
  p.close()


def test_an_exact_world_model_agrees_with_the_real_game(pool):
  world = _OracleWorld(TASKS)
  rep = wm2real.wm2real(ExpertAgent(TASKS), world, TASKS, max_steps=30, pool=pool,
                        steps=3)
  overall = rep["overall"]
  assert overall["wm_success"]["mean"] == 1.0 and overall["wm_success"]["n"] == 3
  assert overall["wm2real"]["mean"] == 1.0 and overall["wm2real"]["n"] == 3
  assert overall["replay_success"]["mean"] == 1.0
  single = rep["single_step"]
  assert single["model"]["pass"]["mean"] == 1.0
  assert single["model"]["pass"]["n"] == single["transitions"] > 3
  assert single["copy"]["pass"]["mean"] < 1.0  # the floor is below an exact model
  assert all(c == {"steps": 3} for c in world.calls)  # sampler overrides reach the model
  assert rep["per_env"][ENV]["wm2real"]["n"] == 3


def test_a_world_model_that_says_solved_too_early_transfers_nothing(pool):
  rep = wm2real.wm2real(ExpertAgent(TASKS), _LyingWorld(TASKS), TASKS, max_steps=30, pool=pool,
                        single_step_examples=0)
  overall = rep["overall"]
  assert overall["wm_success"]["mean"] == 1.0
  assert overall["steps"]["mean"] == 1.0  # every episode ended after one action
  assert overall["wm2real"]["mean"] == 0.0 and overall["wm2real"]["n"] == 3
  assert rep["single_step"] is None
  assert all(len(r["actions"]) == 1 and r["real_success"] == 0.0 for r in rep["episodes"])


def test_single_step_of_the_copy_world_model_is_the_copy_floor(pool):
  rep = wm2real.wm2real(RandomAgent(TASKS), _CopyWorld(TASKS), TASKS, max_steps=3, pool=pool,
                        single_step_examples=7)
  single = rep["single_step"]
  assert single["transitions"] == 7
  assert single["model"] == single["copy"]
  assert rep["overall"]["wm_success"]["mean"] == 0.0
  # Nothing won inside the world model: WM2Real has no episodes to score.
  assert rep["overall"]["wm2real"]["n"] == 0
  text = wm2real.format_report(rep)
  assert "wm2real - (n 0: no win inside the world model)" in text and "nan" not in text


def test_replay_stops_when_the_game_says_done(pool):
  env = envs.make(ENV)
  env.reset(TASKS[0][1])
  actions = []
  while True:
    action = env.expert_action()
    actions.append(action)
    if env.step(action).done:
      break
  assert wm2real.replay(pool, *TASKS[0], actions + ["a move after the end"])
  assert not wm2real.replay(pool, *TASKS[0], actions[:-1])


@pytest.mark.slow
def test_command_line(tiny_models, tmp_path):
  out = tmp_path / "wm2real.json"
  proc = subprocess.run(
      [sys.executable, "-m", "launch.wm2real", "--agent=expert",
       f"--world_model={tiny_models['mdlm']}", f"--env={ENV}", "--episodes=2", "--max_steps=2",
       "--single_step_examples=4", f"--out={out}", "--steps=2"],
      cwd=REPO, capture_output=True, text=True, timeout=900, check=False)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  rep = json.loads(out.read_text())
  assert rep["config"]["objective"] == "mdlm" and rep["config"]["sample"] == {"steps": 2}
  assert rep["overall"]["wm_success"]["n"] == 2
  assert rep["single_step"]["transitions"] == 4
  assert "single step, copy s_t" in proc.stdout
