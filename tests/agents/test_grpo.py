"""Agent GRPO: the episode batch, rewards, config checks, runs in a world model
and in the real environment, resume, and the direction of one update."""

import json
import os

import numpy as np
import pytest

from mdlm_wm import config as config_lib
from mdlm_wm.agents import grpo as agent_grpo
from mdlm_wm.agents import load_agent
from mdlm_wm.agents.episodes import EnvPool, Episode
from mdlm_wm.data.schema import Spec
from mdlm_wm.rl import loop
from mdlm_wm.world_model import Samples
from tests.conftest import apply_overrides, read_metrics

SPEC = Spec("s0", "task")


@pytest.mark.parametrize("key,value,match", [
    ("agent", "", "agent"),
    ("env", "", "env"),
    ("world_model", "", "world_model"),
    ("env_backend", "dream", "env_backend"),
    ("grpo.num_episodes", 1, "num_episodes"),
    ("grpo.horizon", 0, "horizon"),
    ("grpo.clip_eps", 0.0, "clip_eps"),
    ("reward.success", 0.0, "nonzero"),
    ("reward.step_cost", -1.0, "step_cost"),
    ("reward.bonus", 1.0, "unknown"),
    ("sample.temperature", 0.0, "temperature"),
    ("train.eval_split", "dev", "eval_split"),
])
def test_validate_agent_grpo_rejects(key, value, match):
  cfg = apply_overrides(config_lib.agent_grpo_base_config(),
                        **{"agent": "a", "world_model": "w", "env": "household", key: value})
  with pytest.raises(ValueError, match=match):
    config_lib.validate_agent_grpo(cfg)


def test_real_backend_needs_no_world_model():
  cfg = apply_overrides(config_lib.agent_grpo_base_config(),
                        **{"agent": "a", "env": "household", "env_backend": "real"})
  config_lib.validate_agent_grpo(cfg)
  with pytest.raises(ValueError, match="divisible"):
    config_lib.validate_agent_grpo(cfg, batch_shards=3)


def test_episode_reward():
  w = config_lib.agent_grpo_base_config().reward
  ep = Episode("household", 0, SPEC, "[room: hall | progress: 1/4]", max_steps=10,
               history=[("a", "x")] * 4)
  assert agent_grpo.episode_reward(ep, w, 10) == 0.0
  w.progress, w.step_cost = 2.0, 0.5
  assert agent_grpo.episode_reward(ep, w, 10) == pytest.approx(2.0 * 0.25 - 0.5 * 0.4)
  ep.success = True
  assert agent_grpo.episode_reward(ep, w, 10) == pytest.approx(1.0 + 0.5 - 0.2)


class _FakePolicy:
  """`sample` like PolicyAgent's: context width 2 + t, completion [t, t, <eot>=3, 0]."""

  def sample(self, turns, *, seed, params):
    n, t = len(turns), len(turns[0].history)
    context = np.tile(np.arange(2 + t, dtype=np.int32) + 10 * t, (n, 1))
    tokens = np.tile(np.array([[t + 5, t + 5, 3, 0]], np.int32), (n, 1))[:, None]
    return (Samples(context, np.ones_like(context, bool), np.full((n, 4), -1), tokens),
            [[f"act {t}"] for _ in turns])


def test_action_recorder_builds_the_update_batch():
  episodes = [Episode("e", 0, SPEC, "o", max_steps=3) for _ in range(3)]
  recorder = agent_grpo.ActionRecorder(_FakePolicy(), params=None, seed=0)
  # Episode 0 acts twice, 1 once, 2 never (say it failed to start).
  for t, live in enumerate([episodes[:2], episodes[:1]]):
    assert recorder(live, t) == [f"act {t}"] * len(live)
    for ep in live:
      ep.history.append(("o", f"act {t}"))
  host = recorder.batch(episodes, [0.5, -1.0, 2.0], eot_id=3, multiple=4)
  assert host["context"].shape == (4, 3) and host["completion"].shape == (4, 4)
  # Rows: episode 0 at t=0, t=1; episode 1 at t=0; one padding row.
  np.testing.assert_array_equal(host["advantages"], [0.5, 0.5, -1.0, 0.0])
  np.testing.assert_array_equal(host["context"][:3], [[0, 0, 1], [10, 11, 12], [0, 0, 1]])
  np.testing.assert_array_equal(host["valid"][:3], [[0, 1, 1], [1, 1, 1], [0, 1, 1]])
  np.testing.assert_array_equal(host["completion"][1], [6, 6, 3, 0])
  np.testing.assert_array_equal(host["mask"], [[1, 1, 1, 0]] * 3 + [[0, 0, 0, 0]])


def agent_grpo_config(agent, world_model, **overrides):
  cfg = config_lib.agent_grpo_base_config()
  cfg.agent, cfg.world_model, cfg.env = agent, world_model, "household,files"
  cfg.grpo.num_tasks, cfg.grpo.num_episodes, cfg.grpo.horizon, cfg.grpo.mu = 2, 2, 2, 2
  cfg.world_model_sample.steps = 4
  cfg.optim.warmup_steps = 0
  cfg.train.steps = 2
  cfg.train.log_every = 1
  cfg.train.checkpoint_every = 1
  cfg.train.tensorboard = False
  return apply_overrides(cfg, **overrides)


@pytest.mark.slow
def test_agent_grpo_in_the_world_model_runs_resumes_and_stays_loadable(tiny_agent, tiny_models,
                                                                       tmp_path):
  workdir = str(tmp_path / "agent_grpo")
  judged = []

  def success_fn(spec, state):
    judged.append(state)
    # Alternates along the episodes, which come in groups of G = 2, so each
    # group has a success and a failure: every step has reward spread (an update).
    return len(judged) % 2 == 0

  cfg = agent_grpo_config(tiny_agent, tiny_models["ar"])
  result = agent_grpo.run(cfg, workdir, max_steps=1, success_fn=success_fn)
  assert result.step == 1 and not result.preempted
  assert agent_grpo.run(cfg, workdir, success_fn=success_fn).step == 2
  rows = [r for r in read_metrics(workdir) if "success_rate" in r]
  assert [r["step"] for r in rows] == [1, 2]
  again = agent_grpo.run(cfg, workdir, success_fn=success_fn)
  assert again.summary().startswith("nothing to train: the workdir is already at step 2")
  for r in rows:
    assert 0 <= r["success_rate"] <= 1 and 1 <= r["episode_length"] <= 2
    assert np.isfinite(r["loss"]) and r["kl"] >= 0 and 0 <= r["clip_fraction"] <= 1
    assert r["time_agent"] > 0 and r["time_world"] > 0 and r["episodes_per_sec"] > 0
  # Every predicted state was judged, and only those.
  assert len(judged) == sum(r["actions"] for r in rows)
  agent = load_agent(workdir)
  assert len(agent.act(Spec("s0", "Move every .log file."), [], "s0", num_samples=2)) == 2


@pytest.mark.slow
def test_agent_grpo_in_the_real_environment(tiny_agent, tmp_path):
  workdir = str(tmp_path / "agent_grpo_real")
  cfg = agent_grpo_config(tiny_agent, "", **{"env_backend": "real", "train.steps": 1,
                                             "train.eval_episodes": 1, "train.eval_max_steps": 3})
  result = agent_grpo.run(cfg, workdir)
  assert result.step == 1
  (row,) = [r for r in read_metrics(workdir) if "success_rate" in r]
  # A 12-step BC agent solves nothing in two steps: every group has zero spread.
  assert row["success_rate"] == 0.0 and row["zero_spread"] == 1.0 and row["actions"] == 8
  assert row["no_signal"] == 1.0  # no reward spread: no Adam update drifts the agent
  assert result.summary() == "done: step 1, success rate 0.000, reward 0.000"
  assert result.evals["step"] == 1 and 0 <= result.evals["success"] <= 1
  assert os.path.exists(os.path.join(workdir, "eval", "real.step0.json"))
  with open(os.path.join(workdir, "eval", "real.step1.json")) as f:
    assert len(json.load(f)["episodes"]) == 2  # one valid task per environment


def test_one_update_raises_the_log_prob_of_positive_advantage_actions(tiny_agent):
  import jax
  from mdlm_wm.model import sharding
  agent = load_agent(tiny_agent, temperature=1.0)
  cfg = agent_grpo_config(tiny_agent, "", **{"grpo.beta": 0.0, "grpo.mu": 1,
                                             "optim.lr": 3e-3})
  episodes = EnvPool().start([("household", 700_000), ("files", 700_000)], live=False,
                             max_steps=2)
  G = 4
  samples, _ = agent.sample([ep.turn() for ep in episodes], num_samples=G, seed=0)
  N, T = len(episodes) * G, samples.tokens_BGT.shape[-1]
  completion = samples.tokens_BGT.reshape(N, T)
  advantages = np.tile([1.0, -1.0], N // 2).astype(np.float32)
  host = {"context": np.repeat(samples.context_BC, G, 0),
          "valid": np.repeat(samples.valid_BC, G, 0), "completion": completion,
          "mask": loop.completion_mask(completion, agent.model.tokenizer.eot_id),
          "advantages": advantages}
  mesh = sharding.make_mesh((1, 1, 1), jax.devices()[:1])
  learner = loop.make_learner(agent.model.params, cfg, mesh, loop.logprob_fn(
      agent.model.graphdef, "ar", cfg.grpo, agent.model.tokenizer.mask_id, "loglinear"))
  key = jax.random.key(0)
  batch, _ = learner.prepare(host, key)
  metrics = learner.apply(batch, key, mu=1)
  assert metrics["finite"] and metrics["clip_fraction"] == 0.0
  after = np.asarray(learner.logprob(learner.state["params"], batch, key))
  delta = np.sum((after - np.asarray(batch["logp_old"])) * host["mask"], axis=1)
  assert delta[advantages > 0].mean() > 0 > delta[advantages < 0].mean(), delta
