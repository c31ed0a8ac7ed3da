"""World-model GRPO loop: runs on MDLM and AR, survives faulty rewards, resumes."""

import json
import os
import signal

import numpy as np
import pytest

from mdlm_wm import config as config_lib
from mdlm_wm.eval import evaluate as ev
from mdlm_wm.rl import loop, wm_grpo
from mdlm_wm.world_model import WorldModel
from tests.conftest import apply_overrides, read_metrics


def test_completion_mask_stops_after_first_eot():
  eot = 3
  tokens = np.array([[5, 6, 3, 3, 3], [5, 6, 7, 8, 9], [3, 4, 3, 5, 5]])
  np.testing.assert_array_equal(loop.completion_mask(tokens, eot), [
      [1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]])


@pytest.mark.parametrize("key,value,match", [
    ("grpo.num_generations", 1, "num_generations"),
    ("grpo.clip_eps", 0.0, "clip_eps"),
    ("grpo.beta", -0.1, "beta"),
    ("grpo.mu", 0, "mu"),
    ("grpo.advantage", "median", "advantage"),
    ("sample.temperature", 0.0, "temperature"),
    ("rewards.state_check", 0.0, "nonzero"),
])
def test_validate_grpo_rejects(key, value, match):
  cfg = apply_overrides(config_lib.grpo_base_config(), **{key: value})
  with pytest.raises(ValueError, match=match):
    config_lib.validate_grpo(cfg)


def test_validate_grpo_needs_rollouts_divisible_by_the_mesh():
  cfg = config_lib.grpo_base_config()
  cfg.grpo.num_prompts, cfg.grpo.num_generations = 3, 2
  with pytest.raises(ValueError, match="divisible"):
    config_lib.validate_grpo(cfg, batch_shards=4)
  config_lib.validate_grpo(cfg, batch_shards=2)


def grpo_config(init, corpus, **overrides):
  cfg = config_lib.grpo_base_config()
  cfg.init = init
  cfg.data.eval = f"{corpus}/test.jsonl"
  cfg.grpo.num_prompts, cfg.grpo.num_generations, cfg.grpo.mu = 2, 2, 2
  cfg.sample.steps = 4
  cfg.optim.warmup_steps = 0
  cfg.train.steps = 2
  cfg.train.log_every = 1
  cfg.train.eval_every = 100
  cfg.train.eval_examples = 4
  cfg.train.eval_samples = 2
  cfg.train.checkpoint_every = 1
  cfg.train.tensorboard = False
  return apply_overrides(cfg, **overrides)


def test_unset_sample_settings_keep_the_world_models_and_a_bad_one_stops_the_run(
    tiny_models, tiny_corpus, tmp_path):
  cfg = grpo_config(tiny_models["mdlm"], tiny_corpus)
  assert config_lib.sample_overrides(cfg.sample) == {"steps": 4, "temperature": 1.0}
  cfg.sample.threshold, cfg.sample.confidence = 1.0, "margin"
  assert config_lib.sample_overrides(cfg.sample) == {
      "steps": 4, "temperature": 1.0, "threshold": 1.0, "confidence": "margin"}
  with pytest.raises(ValueError, match=r"config.sample.threshold: must be in \[0, 1\), got 1.0"):
    wm_grpo.run(cfg, str(tmp_path / "grpo"))
  assert not (tmp_path / "grpo").exists()


class FlakyReward:
  """Raises on every 3rd call and returns NaN on every 5th; else the call's
  parity, so that each step has a group with reward spread (an update)."""

  def __init__(self):
    self.calls = 0

  def __call__(self, spec, step, prediction):
    self.calls += 1
    if self.calls % 3 == 0:
      raise RuntimeError("checker crashed")
    if self.calls % 5 == 0:
      return float("nan")
    return float(self.calls % 2)


@pytest.mark.parametrize("objective", ["mdlm", "ar"])
def test_grpo_runs_survives_faulty_rewards_and_writes_a_loadable_checkpoint(
    tiny_models, tiny_corpus, tmp_path, objective):
  workdir = str(tmp_path / "grpo")
  flaky = FlakyReward()
  result = wm_grpo.run(grpo_config(tiny_models[objective], tiny_corpus), workdir, reward_fn=flaky)
  assert result.step == 2 and not result.preempted
  assert flaky.calls == 8  # 2 steps x B 2 x G 2
  rows = [r for r in read_metrics(workdir) if "reward_mean" in r]
  assert [r["step"] for r in rows] == [1, 2]
  # Step 1 makes calls 1-4 (3 raises), step 2 calls 5-8 (5 is NaN, 6 raises).
  assert [r["reward_failures"] for r in rows] == [1.0, 2.0]
  for r in rows:
    assert np.isfinite(r["loss"]) and r["kl"] >= 0 and 0 <= r["clip_fraction"] <= 1
    assert r["time_sample"] > 0 and r["rollouts_per_sec"] > 0
  assert result.evals["test"]["step"] == 2
  # The launcher's last line; the evaluations printed theirs as they ran.
  assert result.summary() == (f"done: step 2, reward {rows[1]['reward_mean']:.3f}, "
                              f"pass rate {rows[1]['pass_rate']:.3f}")
  assert os.path.exists(os.path.join(workdir, "eval", "test.step0.json"))
  assert os.path.exists(os.path.join(workdir, "eval", "test.step2.json"))
  examples = wm_grpo._load_examples(f"{tiny_corpus}/test.jsonl", 1, 4)
  samples = ev.read_predictions(os.path.join(workdir, "eval", "test.step2.predictions.jsonl"),
                                examples)
  assert [len(s) for s in samples] == [2] * 4
  wm = WorldModel.load(workdir)
  assert wm.objective == objective
  assert len(wm.generate([wm_grpo._load_examples(f"{tiny_corpus}/test.jsonl", 1, 1)[0]
                          .transition], num_samples=2, steps=4)[0]) == 2


def test_grpo_resumes_where_it_stopped(tiny_models, tiny_corpus, tmp_path):
  workdir = str(tmp_path / "grpo")
  cfg = grpo_config(tiny_models["mdlm"], tiny_corpus, **{"data.eval": "", "train.steps": 3})
  assert wm_grpo.run(cfg, workdir, max_steps=2).step == 2
  result = wm_grpo.run(cfg, workdir)
  assert result.step == 3
  assert [r["step"] for r in read_metrics(workdir) if "reward_mean" in r] == [1, 2, 3]


def test_sigterm_saves_the_step_in_progress_and_stops(tiny_models, tiny_corpus, tmp_path):
  workdir = str(tmp_path / "grpo")
  cfg = grpo_config(tiny_models["ar"], tiny_corpus,
                    **{"data.eval": "", "train.steps": 3, "train.checkpoint_every": 100})

  def reward(spec, step, prediction):  # the notice arrives during step 1's scoring
    if not os.path.exists(os.path.join(workdir, "signalled")):
      open(os.path.join(workdir, "signalled"), "w").close()
      os.kill(os.getpid(), signal.SIGTERM)
    return float(len(prediction) % 2)

  result = wm_grpo.run(cfg, workdir, reward_fn=reward)
  assert result.preempted and result.step == 1
  assert sorted(os.listdir(os.path.join(workdir, "checkpoints"))) == ["1"]
  assert wm_grpo.run(cfg, workdir, reward_fn=reward).step == 3


def test_a_crash_during_an_evaluation_keeps_the_step_and_the_rerun_evaluates_it(
    tiny_models, tiny_corpus, tmp_path, monkeypatch):
  workdir = str(tmp_path / "grpo")
  cfg = grpo_config(tiny_models["ar"], tiny_corpus,
                    **{"train.eval_every": 2, "train.checkpoint_every": 100})
  evaluate_splits = wm_grpo.evaluate_splits

  def killed_at_step_2(wm, params, splits, cfg, step, workdir):
    if step == 2:
      raise KeyboardInterrupt("killed during the step-2 evaluation")
    return evaluate_splits(wm, params, splits, cfg, step, workdir)

  monkeypatch.setattr(wm_grpo, "evaluate_splits", killed_at_step_2)
  with pytest.raises(KeyboardInterrupt):
    wm_grpo.run(cfg, workdir)
  assert "2" in os.listdir(os.path.join(workdir, "checkpoints"))  # saved before the evaluation
  monkeypatch.setattr(wm_grpo, "evaluate_splits", evaluate_splits)
  calls = []
  result = wm_grpo.run(cfg, workdir, reward_fn=lambda *a: calls.append(1) or 0.0)
  assert result.step == 2 and result.evals["test"]["step"] == 2
  assert not calls  # no training step was redone
  assert os.path.exists(os.path.join(workdir, "eval", "test.step2.json"))
  assert [r["step"] for r in read_metrics(workdir) if "eval/test/pass" in r] == [0, 2]
  again = wm_grpo.run(cfg, workdir)  # evaluated once: a third run has nothing to do, and says so
  assert again.evals == {} and again.steps_run == 0
  assert again.summary().startswith("nothing to train: the workdir is already at step 2")


def test_eval_at_start_false_skips_only_the_step_0_evaluation(tiny_models, tiny_corpus, tmp_path):
  workdir = str(tmp_path / "grpo")
  cfg = grpo_config(tiny_models["ar"], tiny_corpus, **{"train.eval_at_start": False})
  assert wm_grpo.run(cfg, workdir).evals["test"]["step"] == 2
  assert sorted(os.listdir(os.path.join(workdir, "eval"))) == [
      "test.step2.json", "test.step2.predictions.jsonl"]


def test_eval_sample_settings_apply_to_the_evaluation_only(tiny_models, tiny_corpus, tmp_path):
  workdir = str(tmp_path / "grpo")
  cfg = grpo_config(tiny_models["mdlm"], tiny_corpus, **{
      "train.steps": 1, "eval_sample.temperature": 0.0, "eval_sample.block_size": 32})
  rollouts = []
  wm_grpo.run(cfg, workdir, reward_fn=lambda spec, step, text: rollouts.append(text) or 0.0)
  assert len(set(rollouts)) > 1  # the rollouts are still sampled at T = 1
  examples = wm_grpo._load_examples(f"{tiny_corpus}/test.jsonl", 1, 4)
  for step in (0, 1):
    samples = ev.read_predictions(
        os.path.join(workdir, "eval", f"test.step{step}.predictions.jsonl"), examples)
    assert all(a == b for a, b in samples)  # greedy: both samples alike
  cfg.eval_sample.threshold = 1.0
  with pytest.raises(ValueError, match=r"config.eval_sample.threshold: must be in"):
    wm_grpo.run(cfg, str(tmp_path / "bad"))


def test_a_step_without_reward_spread_leaves_the_params_alone(tiny_models, tiny_corpus, tmp_path):
  import jax
  workdir = str(tmp_path / "grpo")
  cfg = grpo_config(tiny_models["ar"], tiny_corpus, **{"data.eval": ""})
  calls = []

  def reward(spec, step, prediction):  # step 1 (calls 1-4) has spread, step 2 none
    calls.append(1)
    return float(len(calls) % 2) if len(calls) <= 4 else 0.5

  wm_grpo.run(cfg, workdir, reward_fn=reward)
  rows = [r for r in read_metrics(workdir) if "reward_mean" in r]
  assert "no_signal" not in rows[0] and rows[1]["no_signal"] == 1.0
  # Without the skip, Adam's momentum from step 1 would move the params at step 2.
  step1, step2 = WorldModel.load(workdir, step=1), WorldModel.load(workdir, step=2)
  assert not all(np.array_equal(a, b) for a, b in zip(
      jax.tree.leaves(WorldModel.load(tiny_models["ar"]).params), jax.tree.leaves(step1.params)))
  assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(step1.params),
                                                  jax.tree.leaves(step2.params)))


@pytest.mark.parametrize("objective", ["mdlm", "ar"])
def test_one_update_raises_the_log_prob_of_positive_advantage_samples(tiny_models, tiny_corpus,
                                                                      objective):
  import jax
  import optax
  from mdlm_wm.train import state as train_state
  wm = WorldModel.load(tiny_models[objective])
  cfg = grpo_config(tiny_models[objective], tiny_corpus, **{"grpo.beta": 0.0})
  examples = wm_grpo._load_examples(f"{tiny_corpus}/test.jsonl", 1, 2)
  G = 4
  samples = wm.sample_tokens([ex.transition for ex in examples], num_samples=G, seed=0, steps=4)
  N, T = len(examples) * G, samples.tokens_BGT.shape[-1]
  completion = samples.tokens_BGT.reshape(N, T)
  advantages = np.tile([1.0, -1.0], N // 2).astype(np.float32)
  batch = {"context": np.repeat(samples.context_BC, G, 0),
           "valid": np.repeat(samples.valid_BC, G, 0),
           "completion": completion, "advantages": advantages,
           "mask": loop.completion_mask(completion, wm.tokenizer.eot_id)}
  lp = jax.jit(loop.logprob_fn(wm.graphdef, objective, cfg.grpo, wm.tokenizer.mask_id,
                               wm.cfg.diffusion.schedule, wm.block))
  key = jax.random.key(3)
  before = lp(wm.params, batch, key)
  batch["logp_old"] = batch["logp_ref"] = before
  tx = optax.sgd(0.05)
  state = train_state.init_train_state(wm.params, tx)
  state, metrics = jax.jit(loop.update_fn(lp, tx, cfg.grpo))(state, batch, key)
  assert bool(metrics["finite"]) and float(metrics["clip_fraction"]) == 0.0
  delta = np.sum((np.asarray(lp(state["params"], batch, key)) - np.asarray(before))
                 * batch["mask"], axis=1)
  assert delta[advantages > 0].mean() > 0 > delta[advantages < 0].mean(), delta


def test_a_finished_eval_report_is_reused_not_recomputed(tmp_path):
  os.makedirs(tmp_path / "eval")
  report = {"step": 3, "examples": 2, "overall": {"pass": {"mean": 0.25}, "env": {"mean": 0.5}}}
  with open(tmp_path / "eval" / "test.step3.json", "w") as f:
    json.dump(report, f)
  # wm=None: any attempt to sample (instead of reusing the report) raises.
  out = wm_grpo.evaluate_splits(None, None, {"test": ["a", "b"]}, config_lib.grpo_base_config(),
                                3, str(tmp_path))
  assert out == {"test": {"pass": 0.25, "env": 0.5}}
  with pytest.raises(AttributeError):
    wm_grpo.evaluate_splits(None, None, {"test": ["a", "b", "c"]},
                            config_lib.grpo_base_config(), 3, str(tmp_path))
