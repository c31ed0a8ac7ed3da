"""Invariants every registered environment must hold (the per-env files test the rest)."""

import pytest

from mdlm_wm.checks.generic import check_score, generic_result
from mdlm_wm.data import schema
from mdlm_wm.envs import base, registry

ENVS = registry.env_names()


def test_at_least_five_builtin_environments():
  assert len(ENVS) >= 5, ENVS
  assert {"household", "lab", "shop", "files", "calendar"} <= set(ENVS)


def test_unknown_environment_is_a_clear_error():
  with pytest.raises(KeyError, match="unknown environment 'nope'; known: "):
    registry.make("nope")


@pytest.mark.parametrize("name", ENVS)
def test_spec_and_episode_are_valid_schema(name):
  env = registry.make(name)
  assert len(env.steers) >= 2
  ep, _ = base.run_episode(env, 11, "noisy")
  again = schema.episode_from_dict(schema.episode_to_dict(ep))
  assert again == ep and ep.env == name and ep.spec.task and ep.spec.rules


@pytest.mark.parametrize("name", ENVS)
def test_reference_passes_and_a_wrong_state_is_rejected(name):
  env, check = registry.make(name), registry.state_check_fn(name)
  wrong = 0
  for seed in range(8):
    for policy in base.POLICIES:
      ep, _ = base.run_episode(env, seed, policy)
      for i, step in enumerate(ep.steps):
        assert check_score(step.checks, step.next_state) == 1.0
        assert check(ep.spec, step, step.next_state) == 1.0
        # Another step's next state that misses this step's determined facts is
        # a wrong prediction: the environment's own checker must reject it too
        # (missing only revealed facts, it may be a valid invented outcome).
        other = ep.steps[i - 1].next_state
        if not generic_result(step.checks, other).passed:
          wrong += 1
          assert check(ep.spec, step, other) < 1.0, (ep.id, i)
  assert wrong > 20


@pytest.mark.parametrize("name", ENVS)
def test_steer_none_lets_the_seed_decide(name):
  env = registry.make(name)
  steers = [env.reset(seed)[0].steer for seed in range(60)]
  steered = sum(bool(s) for s in steers)
  assert 8 <= steered <= 40, steered
  assert all(s in env.steers for s in steers if s)
  assert env.reset(0, steer="")[0].steer == ""


def test_a_user_environment_registers_by_name(monkeypatch):
  from mdlm_wm import envs
  from tests.envs import fake_env
  monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
  assert envs.register(fake_env.Boxes) is fake_env.Boxes
  assert isinstance(envs.make(fake_env.Boxes.name), fake_env.Boxes)
  assert fake_env.Boxes.name in envs.env_names()
  clash = type("OtherBoxes", (fake_env.Boxes,), {})
  with pytest.raises(ValueError, match="registered twice"):
    envs.register(clash)
