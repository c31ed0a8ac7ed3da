import warnings

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from mdlm_wm.data import schema
from mdlm_wm.data.serialize import Transition
from mdlm_wm.gym_env import REPLACEMENT_CHAR, WorldModelEnv, WorldModelVectorEnv, never_done
from mdlm_wm.world_model import WorldModel

# One sampler setting everywhere, so every test reuses the same compilations.
FAST = {"steps": 4}


@pytest.fixture(scope="module")
def models(tiny_models):
  return {k: WorldModel.load(v) for k, v in tiny_models.items()}


@pytest.fixture(scope="module")
def data(tiny_corpus):
  return f"{tiny_corpus}/test.jsonl"


@pytest.fixture(scope="module")
def specs(data):
  return [ep.spec for ep in schema.iter_episodes(data)]


def test_check_env_passes_and_only_misses_a_registry_spec(models, data):
  env = WorldModelEnv(models["mdlm"], data, max_steps=3, sample_overrides=FAST)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    check_env(env)
  messages = [str(w.message) for w in caught]
  assert len(messages) == 1 and "not having a spec" in messages[0], messages


def test_same_seed_same_spec_and_predictions_other_seed_other_predictions(models, specs):
  env = WorldModelEnv(models["mdlm"], specs, max_steps=5, sample_overrides=FAST)
  actions = ["look", "go north", "inventory"]

  def episode(seed):
    obs, info = env.reset(seed=seed)
    return info["spec"], [obs] + [env.step(a)[0] for a in actions]

  spec_a, run_a = episode(7)
  spec_b, run_b = episode(7)
  assert spec_a == spec_b and run_a == run_b
  # Same spec, other seed: the predictions differ.
  env = WorldModelEnv(models["mdlm"], [spec_a], max_steps=5, sample_overrides=FAST)
  obs_7 = [env.reset(seed=7)[0]] + [env.step(a)[0] for a in actions]
  obs_8 = [env.reset(seed=8)[0]] + [env.step(a)[0] for a in actions]
  assert obs_7[0] == obs_8[0] == spec_a.initial_state
  assert obs_7[1:] != obs_8[1:]


def test_observations_are_in_the_text_space(models, specs):
  env = WorldModelEnv(models["mdlm"], specs, max_steps=2, sample_overrides=FAST)
  obs, _ = env.reset(seed=0)
  assert obs in env.observation_space
  for action in ["look", "x" * 50]:
    obs = env.step(action)[0]
    assert isinstance(obs, str) and obs in env.observation_space
  # A character the tokenizer can only spell as raw bytes: shown as U+FFFD.
  spec = specs[0]
  odd = schema.Spec(initial_state="done \u2713", task=spec.task)
  obs, _ = env.reset(seed=0, options={"spec": odd})
  assert obs == "done " + REPLACEMENT_CHAR and obs in env.observation_space
  too_long = schema.Spec(initial_state="a" * (env.observation_space.max_length + 1), task="t")
  with pytest.raises(ValueError, match="observation space holds"):
    env.reset(options={"spec": too_long})


def test_reward_fn_sees_the_transition_and_done_terminates(models, specs):
  calls = []

  def reward_fn(spec, history, state, action, next_state):
    calls.append((spec, history, state, action, next_state))
    return 0.5 * len(calls)

  judged = []
  env = WorldModelEnv(models["mdlm"], specs[:1], reward_fn, max_steps=5,
                      done=lambda spec, text: judged.append(text) or len(judged) == 2,
                      sample_overrides=FAST)
  s0, info = env.reset(seed=1)
  s1, r1, term1, trunc1, info1 = env.step("look")
  s2, r2, term2, trunc2, info2 = env.step("take key")
  assert (r1, term1, trunc1, r2, term2, trunc2) == (0.5, False, False, 1.0, True, False)
  # reward_fn and done read the model's own text; the agent sees it within the
  # observation charset (an untrained model's byte-fallback output can leave it).
  raw1, raw2 = calls[0][4], calls[1][4]
  shown = lambda text: "".join(c if c in env.observation_space.character_set
                               else REPLACEMENT_CHAR for c in text)
  assert (shown(raw1), shown(raw2)) == (s1, s2)
  assert calls[0] == (specs[0], (), s0, "look", raw1)
  assert calls[1] == (specs[0], ((s0, "look"),), raw1, "take key", raw2)
  assert judged == [raw1, raw2]
  assert info["step"] == 0 and info1["step"] == 1 and info2["step"] == 2
  assert info1["sample_seed"] != info2["sample_seed"]
  with pytest.raises(RuntimeError, match="call reset"):
    env.step("again")


def test_truncation_at_max_steps_and_default_success_reward(models, specs):
  never = WorldModelEnv(models["mdlm"], specs[:1], max_steps=2, done=never_done,
                        sample_overrides=FAST)
  never.reset(seed=0)
  assert never.step("look")[1:4] == (0.0, False, False)
  assert never.step("look")[1:4] == (0.0, False, True)
  always = WorldModelEnv(models["mdlm"], specs[:1], max_steps=2, done=r"^", sample_overrides=FAST)
  always.reset(seed=0)
  assert always.step("look")[1:4] == (1.0, True, False)


def test_spec_sources_list_jsonl_and_callable(models, data, specs):
  wm = models["mdlm"]
  from_file = WorldModelEnv(wm, data, sample_overrides=FAST)
  drawn = {from_file.reset(seed=s)[1]["env"] for s in range(40)}
  assert drawn == {ep.env for ep in schema.iter_episodes(data)}
  seen = []

  def source(rng):
    seen.append(rng)
    return specs[int(rng.integers(len(specs)))]

  env = WorldModelEnv(wm, source, sample_overrides=FAST)
  obs, info = env.reset(seed=3)
  assert isinstance(seen[0], np.random.Generator) and info["spec"] in specs
  assert obs == info["spec"].initial_state and info["env"] == ""
  with pytest.raises(TypeError, match="expected a Spec"):
    WorldModelEnv(wm, lambda rng: "not a spec").reset(seed=0)
  with pytest.raises(ValueError, match="holds no spec"):
    WorldModelEnv(wm, [])
  with pytest.raises(TypeError, match="must hold Spec"):
    WorldModelEnv(wm, ["not a spec"])


def test_default_done_is_the_success_predicate_of_the_episodes_env(models, data, specs):
  env = WorldModelEnv(models["mdlm"], data)
  lab = next(ep for ep in schema.iter_episodes(data) if ep.env == "lab")
  env.reset(seed=0, options={"spec": lab.spec, "env": "lab"})
  assert env.advance("look", "Hot.\n[location: lab | task: open | time: 2]", 0)[1:3] == (0.0, False)
  assert env.advance("mix", "Done.\n[location: lab | task: done | time: 3]", 0)[1:3] == (1.0, True)
  # Unknown environment (a list of Specs): the generic predicate, e.g. a full progress fraction.
  env = WorldModelEnv(models["mdlm"], specs)
  env.reset(seed=0)
  assert env.advance("go", "[room: hall | progress: 1/2]", 0)[1:3] == (0.0, False)
  assert env.advance("go", "[room: hall | progress: 2/2]", 0)[1:3] == (1.0, True)


@pytest.mark.parametrize("objective", ["mdlm", "ar"])
def test_vector_env_is_one_sampler_call_and_matches_sequential(models, data, objective,
                                                               monkeypatch):
  wm = models[objective]
  seeds = [3, 4, 5, 6]
  actions = ["look", "go north", "ls"]
  venv = WorldModelVectorEnv(wm, data, max_steps=2, num_envs=4, done=never_done,
                             sample_overrides=FAST)
  batch_sizes = []
  generate = wm.generate
  monkeypatch.setattr(wm, "generate", lambda trs, **kw: batch_sizes.append(len(trs))
                      or generate(trs, **kw))
  vobs, vinfo = venv.reset(seed=seeds)
  steps = [venv.step([a] * 4) for a in actions]
  # Two batched steps, then every sub-env was truncated and is reset without sampling.
  assert batch_sizes == [4, 4]
  assert steps[1][3].all() and not steps[2][3].any() and (steps[2][1] == 0).all()
  assert len(set(vinfo["env"])) > 1  # sub-envs in one call have different contexts

  for i, seed in enumerate(seeds):
    env = WorldModelEnv(wm, data, max_steps=2, done=never_done, sample_overrides=FAST)
    obs, info = env.reset(seed=seed)
    assert obs == vobs[i] and info["episode_seed"] == vinfo["episode_seed"][i]
    for k in range(2):
      obs, reward, term, trunc, info = env.step(actions[k])
      assert (obs, reward, term, trunc) == (steps[k][0][i], steps[k][1][i], steps[k][2][i],
                                            steps[k][3][i])
      assert info["sample_seed"] == steps[k][4]["sample_seed"][i]
    assert env.reset()[0] == steps[2][0][i]  # next-step autoreset continues each env's stream
  assert batch_sizes == [4, 4] + [1] * 8


@pytest.mark.parametrize("objective", ["mdlm", "ar"])
def test_per_transition_seeds_do_not_depend_on_the_batch(models, specs, objective):
  wm = models[objective]
  a = Transition(specs[0], (), specs[0].initial_state, "look")
  short = schema.Spec("You are in room 0. A key lies here.", "Find the key.")
  b = Transition(short, (), short.initial_state, "take key")
  # Alone, b's context is padded to fewer columns than in a batch with a.
  assert wm.encode_contexts([b])[0].shape[1] < wm.encode_contexts([a, b])[0].shape[1]
  together = wm.generate([a, b, a, a], seed=[11, 12, 13, 11], **FAST)
  assert together[0] == wm.generate([a], seed=[11], **FAST)[0]
  assert together[1] == wm.generate([b], seed=[12], **FAST)[0]
  assert together[0] != together[2] and together[0] == together[3]  # the seed decides
  with pytest.raises(ValueError, match="one seed per transition"):
    wm.generate([a, b], seed=[1, 2, 3])


def test_states_that_do_not_parse_are_drawn_again_as_when_stepped_alone(tiny_models, data):
  wm = WorldModel.load(tiny_models["mdlm"])
  wm.cfg.sample.format_retries = 2
  calls = []
  generate = wm.generate
  wm.generate = lambda trs, **kw: calls.append(len(trs)) or generate(trs, **kw)
  seeds = [3, 4, 5]
  venv = WorldModelVectorEnv(wm, data, max_steps=1, num_envs=3, done=never_done,
                             sample_overrides=FAST)
  venv.reset(seed=seeds)
  batched = venv.step(["look"] * 3)[0]
  # A 4-step model's states rarely parse: the batched call is followed by redraws.
  assert calls[0] == 3 and len(calls) > 1
  for i, seed in enumerate(seeds):
    env = WorldModelEnv(wm, data, max_steps=1, done=never_done, sample_overrides=FAST)
    env.reset(seed=seed)
    assert env.step("look")[0] == batched[i]
