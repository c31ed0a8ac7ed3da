"""Agents in the real environment: the protocol, baselines, tasks and evaluation."""

import pytest

from mdlm_wm import envs
from mdlm_wm.agents import CallableAgent, ExpertAgent, RandomAgent, Turn
from mdlm_wm.agents import tasks as tasks_lib
from mdlm_wm.agents.base import pad_to_bucket
from mdlm_wm.agents.episodes import EnvPool
from mdlm_wm.agents.evaluate import evaluate
from mdlm_wm.data.schema import Spec

SPEC = Spec("room 0", "Find the key.")


def test_callable_agent_calls_once_per_sample():
  calls = []

  def fn(spec, history, observation):
    calls.append((spec.task, history, observation))
    return f"go {len(calls)}"

  agent = CallableAgent(fn)
  assert agent.act(SPEC, [("room 0", "look")], "room 1", num_samples=2) == ["go 1", "go 2"]
  assert calls[0] == ("Find the key.", (("room 0", "look"),), "room 1")
  assert agent.act_batch([Turn(SPEC, (), "a"), Turn(SPEC, (), "b")]) == [["go 3"], ["go 4"]]


def test_pad_to_bucket():
  assert pad_to_bucket([1, 2, 3]) == [1, 2, 3, 3]
  assert pad_to_bucket([1, 2, 3, 4]) == [1, 2, 3, 4]
  assert pad_to_bucket([7]) == [7]


def test_task_splits_are_disjoint_and_miss_the_corpora():
  seeds = {split: set(tasks_lib.split_seeds("household", split, 50))
           for split in ("train", "valid", "test")}
  assert all(len(s) == 50 for s in seeds.values())
  assert not (seeds["train"] & seeds["valid"] or seeds["train"] & seeds["test"]
              or seeds["valid"] & seeds["test"])
  # mdlm_wm/corpus/: corpus seed s, episode i -> world seed s * 1e6 + i.
  assert min(min(s) for s in seeds.values()) >= 700_000
  assert tasks_lib.env_names("household, lab,household") == ["household", "lab"]
  assert tasks_lib.task_list("lab,files", "test", 2) == [
      ("lab", 900_000), ("lab", 900_001), ("files", 900_000), ("files", 900_001)]
  with pytest.raises(KeyError, match="unknown environment"):
    tasks_lib.env_names("kitchen")


def test_an_expert_callable_solves_every_task_and_a_random_one_does_not():
  tasks = tasks_lib.task_list("household,files", "test", 4)
  expert = ExpertAgent(tasks)
  # Any callable is an agent: here one that asks the expert.
  agent = CallableAgent(lambda spec, history, obs: expert.act(spec, history, obs)[0])
  good = evaluate(agent, tasks, batch_size=3)
  overall = good["overall"]
  assert overall["success"] == {"mean": 1.0, "low": 1.0, "high": 1.0, "n": 8}
  assert overall["score"]["mean"] == 1.0
  assert set(good["per_task"]) == {"household", "files"}
  assert [r["seed"] for r in good["episodes"]] == [s for _, s in tasks]
  assert good["errors"] == {"env": 0, "agent": 0} and good["episodes_per_min"] > 0
  bad = evaluate(RandomAgent(tasks), tasks, max_steps=10, batch_size=8)
  assert bad["overall"]["success"]["mean"] < 1.0
  assert all(r["steps"] == 10 for r in bad["episodes"] if not r["success"])
  low, mean, high = (bad["overall"]["steps"][k] for k in ("low", "mean", "high"))
  assert low <= mean <= high


class _CrashingEnv:
  """A household env whose engine dies on the first step of one seed."""

  def __init__(self, env, bad_seed):
    self.env, self.bad_seed, self.max_steps = env, bad_seed, env.max_steps

  def reset(self, seed, steer=None):
    self.seed = seed
    return self.env.reset(seed, steer)

  def step(self, action):
    if self.seed == self.bad_seed:
      raise RuntimeError("engine died")
    return self.env.step(action)


class _CrashingPool(EnvPool):

  def get(self, name, index=0):
    return _CrashingEnv(super().get(name, index), bad_seed=900_001)


def test_env_and_agent_crashes_end_only_their_episode():
  tasks = tasks_lib.task_list("household", "test", 4)
  expert = ExpertAgent(tasks)
  cursed = envs.make("household").reset(900_002)[0].initial_state

  def fn(spec, history, obs):
    if spec.initial_state == cursed:
      raise ValueError("agent bug")
    return expert.act(spec, history, obs)[0]

  report = evaluate(CallableAgent(fn), tasks, batch_size=4, pool=_CrashingPool())
  errors = {r["seed"]: r["error"] for r in report["episodes"]}
  assert errors[900_001].startswith("env: RuntimeError")
  assert errors[900_002].startswith("agent: ValueError")
  assert errors[900_000] is None and errors[900_003] is None
  assert report["errors"] == {"env": 1, "agent": 1}
  # The env crash is left out of the means; the agent's failure counts.
  assert report["overall"]["success"]["n"] == 3
  assert report["overall"]["success"]["mean"] == pytest.approx(2 / 3)
