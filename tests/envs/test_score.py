"""score_prediction: pass grades determined facts and constraints, pass_all every fact."""

import pytest

from mdlm_wm.checks.generic import check_score
from mdlm_wm.data import schema
from mdlm_wm.data.schema import Checks, Spec, Step
from mdlm_wm.envs.score import check_prediction, score_prediction, well_formed
from tests.conftest import episode_dict
from tests.envs import fake_env


@pytest.fixture
def boxes(monkeypatch):
  fake_env.register(monkeypatch)
  monkeypatch.setattr(fake_env.Boxes, "calls", 0)
  return fake_env.episode()


def _other_kind(kind: str) -> str:
  return next(k for k in fake_env.KINDS if k != kind)


def _status(opened: str, content: str) -> str:
  return f"Box 0 holds a {content}. [opened: {opened} | content: {content}]"


def test_reference_passes_everything(boxes):
  for step in boxes.steps:
    out = score_prediction(fake_env.Boxes.name, boxes.spec, step, step.next_state)
    assert out == {"checks": 1.0, "env": 1.0, "well_formed": 1.0, "pass": 1.0, "pass_all": 1.0,
                   "determined_acc": 1.0, "revealed_valid": 1.0, "exact": 1.0}


def test_wrong_revealed_fact_fails_pass_all_only(boxes):
  step = boxes.steps[0]
  assert step.checks.revealed == ("content",)
  guess = _status("1", _other_kind(step.checks.fields["content"]))
  out = score_prediction(fake_env.Boxes.name, boxes.spec, step, guess)
  assert out["pass"] == 1.0 and out["pass_all"] == 0.0
  assert out["determined_acc"] == 1.0 and out["revealed_valid"] == 1.0 and out["env"] == 1.0
  assert out["checks"] < 1.0  # the generic every-fact score still counts the draw


def test_wrong_determined_fact_fails_pass(boxes):
  step = boxes.steps[0]
  out = score_prediction(fake_env.Boxes.name, boxes.spec, step,
                         _status("2", step.checks.fields["content"]))
  assert out["pass"] == out["pass_all"] == 0.0
  assert out["determined_acc"] < 1.0 and out["env"] < 1.0


def test_constraint_violation_in_invented_content_fails_pass(boxes):
  out = score_prediction(fake_env.Boxes.name, boxes.spec, boxes.steps[0], _status("1", "dragon"))
  assert out["pass"] == 0.0 and out["revealed_valid"] == 0.0
  assert out["determined_acc"] == 1.0


def test_a_fact_revealed_earlier_is_determined(monkeypatch):
  fake_env.register(monkeypatch)
  env = fake_env.Boxes()
  spec, _ = env.reset(0)
  env.step("open box 1")
  again = env.step("open box 1")
  step = Step("s", "open box 1", again.next_state, checks=again.checks)
  wrong = _status("1", _other_kind(again.checks.fields["content"]))
  assert score_prediction(fake_env.Boxes.name, spec, step, wrong)["pass"] == 0.0


def test_the_environment_check_runs_once_per_prediction(boxes):
  for step in boxes.steps:
    score_prediction(fake_env.Boxes.name, boxes.spec, step, _status("1", "jar"))
  assert fake_env.Boxes.calls == len(boxes.steps)


def test_combined_result_is_both_checkers(boxes):
  step = boxes.steps[1]
  result = check_prediction(fake_env.Boxes.name, boxes.spec, step, step.next_state)
  # The environment's facts and the generic `field:*` entries, each once.
  assert set(result.determined) == {"format", "field:opened"}
  assert set(result.revealed) == {"field:content"} and set(result.constraints) == {"content_kind"}
  assert check_prediction(fake_env.Boxes.name, boxes.spec, step, "no status").score == 0.0


def test_generic_checks_split_by_revealed_for_an_unregistered_env():
  checks = Checks(must_include=("apple", "drawer"), must_exclude=("knife",),
                  fields={"room": "kitchen", "visible": "2"}, revealed=("apple", "visible"))
  step = Step("s", "open drawer", "In the drawer: an apple. [room: kitchen | visible: 2]",
              checks=checks)
  spec = Spec("", "")
  hidden_wrong = score_prediction("toy", spec, step, "In the drawer: a pen. [room: kitchen | visible: 1]")
  assert "env" not in hidden_wrong
  assert hidden_wrong["pass"] == 1.0 and hidden_wrong["pass_all"] == 0.0
  assert hidden_wrong["determined_acc"] == 1.0
  known_wrong = score_prediction("toy", spec, step, "In the drawer: an apple. [room: hall | visible: 2]")
  assert known_wrong["pass"] == 0.0 and known_wrong["determined_acc"] == 2 / 3
  excluded = score_prediction("toy", spec, step, step.next_state + " A knife.")
  assert excluded["pass"] == 0.0


@pytest.mark.parametrize("prediction", [
    "You are in room 1. A key lies here.\n[location: room 1]",
    "You are in room 1.\n[location: room 1]",
    "A key lies here.\n[location: room 2]",
])
def test_old_format_files_validate_and_score_as_before(write_jsonl, prediction):
  ep = schema.load_episodes(write_jsonl([episode_dict(0)]))[0]
  step = ep.steps[0]
  assert step.checks.revealed == ()
  out = score_prediction(ep.env, ep.spec, step, prediction)
  # Every fact is determined: pass is the old every-check pass.
  old_pass = float(check_score(step.checks, prediction) == 1.0)
  assert out["pass"] == out["pass_all"] == old_pass
  assert out["determined_acc"] == out["checks"] and out["revealed_valid"] == 1.0


def test_real_environments_are_graded_by_their_adapter_check(monkeypatch):
  from mdlm_wm.envs import adapters
  from mdlm_wm.envs.adapters.base import RealEnv
  # The adapters' shared checker, without importing any engine.
  monkeypatch.setattr(adapters, "env_class", lambda family: RealEnv)
  checks = Checks(fields={"location": "cellar", "score": "0"}, revealed=("location",))
  step = Step("You are in the hall.\n[location: hall | score: 0]", "go down",
              "You are in the cellar.\n[location: cellar | score: 0]", checks=checks)
  spec = Spec("You are in the hall.\n[location: hall | score: 0]", "Explore.")
  invented = score_prediction("textworld/explore", spec, step,
                              "You are in the attic.\n[location: attic | score: 0]")
  assert "env" in invented and invented["pass"] == 1.0 and invented["pass_all"] == 0.0
  # A "new" room that is the one you were in breaks the adapters' constraint.
  stayed = score_prediction("textworld/explore", spec, step,
                            "You are in the hall.\n[location: hall | score: 0]")
  assert stayed["pass"] == 0.0 and stayed["revealed_valid"] < 1.0 and stayed["determined_acc"] == 1.0
  # Its parser alone, as format retries use it.
  assert well_formed("textworld/explore", spec, "You are in the attic.\n[location: attic | score: 0]")
  assert not well_formed("textworld/explore", spec, "You are in the attic.")


def test_unparseable_text_invents_nothing_valid():
  from mdlm_wm.checks.result import CheckResult
  # Without the rule, text with no readable content met "every constraint" (none).
  garbage = CheckResult({"format": False, "room": False}, {}, {})
  assert garbage.revealed_valid == 0.0 and not garbage.passed
  assert CheckResult({"format": True}, {}, {}).revealed_valid == 1.0  # nothing to check
  assert CheckResult({"room": True}, {}, {"ids_new": False}).revealed_valid == 0.0
  # Every built-in environment: garbage scores 0 on constraints, its reference 1.
  from mdlm_wm import corpus
  cfg = corpus.CorpusConfig(envs=("calendar", "shop"), episodes_per_env=1)
  for env in cfg.envs:
    ep = next(corpus.generate(cfg, env, 0, 1))
    step = ep.steps[0]
    junk = score_prediction(env, ep.spec, step, '{"status": 2000": "": "",')
    assert junk["revealed_valid"] == 0.0 and junk["pass"] == 0.0, env
    assert score_prediction(env, ep.spec, step, step.next_state)["revealed_valid"] == 1.0, env


def test_well_formed_reads_the_checkers_format_fact_without_a_reference():
  from mdlm_wm import corpus
  from mdlm_wm.envs import registry
  envs = tuple(cls.name for cls in registry.BUILTIN)
  cfg = corpus.CorpusConfig(envs=envs, episodes_per_env=1)
  for env in envs:
    ep = next(corpus.generate(cfg, env, 0, 1))
    for step in ep.steps[:4]:
      for text in (step.next_state, step.state, step.next_state[:len(step.next_state) // 2],
                   '{"status": 2000": "": "",', "Error: you are not at the fridge."):
        expected = check_prediction(env, ep.spec, step, text).determined["format"]
        assert well_formed(env, ep.spec, text) == expected, (env, text)
        assert score_prediction(env, ep.spec, step, text)["well_formed"] == float(expected)
      assert well_formed(env, ep.spec, step.next_state), env
    assert not well_formed(env, ep.spec, "{"), env
  # A name without a checker (a user's own data) accepts anything, as `env` is unscored.
  assert well_formed("toy", ep.spec, "{") and "well_formed" not in score_prediction(
      "toy", ep.spec, ep.steps[0], "{")
