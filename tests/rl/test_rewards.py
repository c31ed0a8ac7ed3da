import math
import threading
import time

import numpy as np
import pytest

from mdlm_wm.data.schema import Spec, Step
from mdlm_wm.envs import base, registry
from mdlm_wm.envs.score import score_prediction
from mdlm_wm.rl import rewards
from tests.envs import fake_env


def _episode(env: str, seed: int = 0, policy: str = "expert"):
  return base.run_episode(registry.make(env), seed, policy)[0]


def test_state_check_scores_reference_one_and_wrong_state_lower():
  ep = _episode("household")
  reward = rewards.state_check("household")
  first, last = ep.steps[0], ep.steps[-1]
  assert first.next_state != last.next_state
  assert reward(ep.spec, first, first.next_state) == 1.0
  assert reward(ep.spec, first, last.next_state) < 1.0
  assert reward(ep.spec, first, "Nothing happens.") < 1.0


@pytest.fixture
def boxes(monkeypatch):
  fake_env.register(monkeypatch)
  monkeypatch.setattr(fake_env.Boxes, "calls", 0)
  return fake_env.episode()


def test_state_check_grades_what_a_model_can_know(boxes):
  reward = rewards.state_check(fake_env.Boxes.name)
  step = boxes.steps[0]  # opens a box: its content is a hidden draw
  other = next(k for k in fake_env.KINDS if k != step.checks.fields["content"])
  cases = {"hidden draw wrong": f"[opened: 1 | content: {other}]",
           "determined fact wrong": f"[opened: 3 | content: {other}]",
           "invented content breaks a rule": "[opened: 1 | content: dragon]"}
  scores = {name: reward(boxes.spec, step, text) for name, text in cases.items()}
  # format + opened + the content constraint: a wrong draw costs nothing.
  assert scores == {"hidden draw wrong": 1.0, "determined fact wrong": pytest.approx(2 / 3),
                    "invented content breaks a rule": pytest.approx(2 / 3)}
  passed = rewards.make_reward({"passed": 1.0}, fake_env.Boxes.name)
  for name, text in cases.items():  # 1.0 exactly when evaluation's pass is 1
    is_pass = bool(score_prediction(fake_env.Boxes.name, boxes.spec, step, text)["pass"])
    assert (scores[name] == 1.0) == is_pass, name
    assert passed(boxes.spec, step, text) == float(is_pass), name
  assert [passed(boxes.spec, step, t) for t in cases.values()] == [1.0, 0.0, 0.0]


def test_a_grpo_step_checks_each_completion_once(boxes):
  # A GRPO step scores its completions for the reward, then for the pass rate.
  env = fake_env.Boxes.name
  items = [(f"{i}/{j}", boxes.spec, step, f"[opened: {j} | content: jar]")
           for i, step in enumerate(boxes.steps) for j in range(4)]
  reward = rewards.make_reward({"state_check": 1.0, "format": 0.5}, env)
  scored = rewards.score_batch([reward] * len(items), items)
  passes = rewards.score_batch([rewards.state_check(env)] * len(items), items, num_threads=2)
  assert fake_env.Boxes.calls == len(items)
  np.testing.assert_allclose(scored.rewards, passes.rewards + 0.5, rtol=1e-6)


def _status_line_case(env: str):
  step = next(s for s in _episode(env).steps if rewards._status_keys(s.next_state))
  # Drop the last `| key: value` of the status line.
  head, _, _ = step.next_state.rstrip().rpartition(" | ")
  return step, head + "]"


def _json_case(env: str):
  step = next(s for s in _episode(env).steps if rewards._json_values(s.next_state))
  return step, step.next_state[:step.next_state.index("}") // 2 + 1]


@pytest.mark.parametrize("env, make_case", [
    ("household", _status_line_case), ("lab", _status_line_case), ("files", _status_line_case),
    ("calendar", _status_line_case), ("calendar", _json_case), ("shop", _json_case),
])
def test_format_validity_on_real_states(env, make_case):
  step, corrupted = make_case(env)
  reward = rewards.format_validity(env)
  assert reward(Spec("", ""), step, step.next_state) == 1.0
  assert reward(Spec("", ""), step, corrupted) == 0.0
  assert reward(Spec("", ""), step, "   ") == 0.0


def test_format_validity_rules():
  step = Step("s", "a", '{"a": [1, 2]} done\n[x: 1 | y: two]')
  reward = rewards.format_validity("toy")
  spec = Spec("", "")
  assert reward(spec, step, '{"b": {}}\n[x: 5 | y: 3]') == 1.0
  assert reward(spec, step, '[1, 2] text [x: 5 | y: 3]') == 1.0  # an array counts too
  assert reward(spec, step, '{"b": }\n[x: 5 | y: 3]') == 0.0  # broken JSON
  assert reward(spec, step, '{"b": 1}\n[y: 3 | x: 5]') == 0.0  # keys out of order
  assert reward(spec, step, '{"b": 1}\n[x: 5 | y: 3] trailing') == 0.0  # not at the end
  assert reward(spec, step, "[" * 5000 + '{"b": 1} [x: 5 | y: 3]') == 1.0  # deep nesting is survived


def test_overlap_and_length_rewards():
  step = Step("s", "a", "the red box is open")
  spec = Spec("", "")
  assert rewards.bleu1_to_reference()(spec, step, step.next_state) == pytest.approx(1.0)
  assert rewards.rouge_l_to_reference()(spec, step, "the red box") == pytest.approx(
      2 * (3 / 3) * (3 / 5) / (3 / 3 + 3 / 5))
  length = rewards.length_penalty(max_ratio=1.5)  # reference 19 chars: 28.5 allowed
  assert length(spec, step, "x" * 28) == 0.0
  assert length(spec, step, "x" * 57) == pytest.approx(-28.5 / 28.5)
  assert length(spec, step, "x" * 34) == pytest.approx(-5.5 / 28.5)
  assert length(spec, step, "x" * 500) == -1.0


def test_make_reward_is_the_weighted_sum():
  step = Step("s", "a", "the red box is open")
  spec = Spec("", "")
  pred = "x" * 57  # length -1, bleu 0, format 1
  combined = rewards.make_reward({"format": 2.0, "length": 0.5, "bleu1": 0.0}, env="toy")
  assert combined(spec, step, pred) == pytest.approx(2.0 * 1.0 + 0.5 * -1.0)
  ep = _episode("shop")
  step = ep.steps[0]
  combined = rewards.make_reward({"state_check": 1.0, "rouge_l": 1.0}, env="shop")
  assert combined(ep.spec, step, step.next_state) == pytest.approx(2.0)


def test_make_reward_rejects_unknown_names_and_all_zero_weights():
  with pytest.raises(ValueError, match="state_check"):
    rewards.make_reward({"bleu4": 1.0}, env="toy")
  with pytest.raises(ValueError, match="zero"):
    rewards.make_reward({"bleu1": 0.0, "length": 0.0}, env="toy")


class _Flaky:
  """Returns float(prediction); raises on every 3rd call, NaN for "nan"."""

  def __init__(self):
    self.calls = 0
    self.lock = threading.Lock()

  def __call__(self, spec, step, prediction):
    with self.lock:
      self.calls += 1
      calls = self.calls
    # Later items finish first under threads, so order must not come from completion.
    time.sleep(0.002 * (12 - int(prediction)) if prediction != "nan" else 0.0)
    if calls % 3 == 0:
      raise RuntimeError(f"flaky call {calls}")
    return float(prediction)


@pytest.mark.parametrize("num_threads", [0, 4])
def test_score_batch_survives_failing_callbacks(num_threads):
  flaky = _Flaky()
  predictions = [str(i) for i in range(12)] + ["nan"]
  items = [(f"item-{i}", Spec("", ""), Step("s", "a", "ref"), p) for i, p in enumerate(predictions)]
  result = rewards.score_batch([flaky] * len(items), items, on_error=-5.0, num_threads=num_threads)
  assert flaky.calls == 13
  # 13 calls: calls 3, 6, 9 and 12 raise; the NaN item fails unless its call raised.
  errors = [e for _, e in result.failures]
  assert sum(e.startswith("RuntimeError: flaky call") for e in errors) == 4
  nan_failed = ("item-12", "non-finite reward nan") in result.failures
  assert len(result.failures) == 4 + nan_failed
  failed = {item_id for item_id, _ in result.failures}
  assert "item-12" in failed
  assert result.rewards.dtype == np.float32 and result.rewards.shape == (13,)
  for i, value in enumerate(result.rewards):
    assert value == (-5.0 if f"item-{i}" in failed else float(i))
  assert result.seconds > 0


def test_score_batch_logs_at_most_ten_failures(monkeypatch):
  logged = []
  monkeypatch.setattr(rewards.logging, "warning", lambda msg, *args: logged.append(msg % args))

  def broken(spec, step, prediction):
    raise ValueError("bad")

  items = [(str(i), Spec("", ""), Step("s", "a", "r"), "p") for i in range(25)]
  result = rewards.score_batch([broken] * 25, items)
  assert len(result.failures) == 25 and result.failures[0] == ("0", "ValueError: bad")
  assert np.all(result.rewards == 0.0)
  assert len(logged) == 11 and "15 more" in logged[-1]


def test_score_batch_counts_non_finite_values():
  items = [("a", Spec("", ""), Step("s", "a", "r"), "p")] * 2
  result = rewards.score_batch([lambda *_: math.inf, lambda *_: 0.25], items)
  assert result.failures == [("a", "non-finite reward inf")]
  np.testing.assert_array_equal(result.rewards, [0.0, 0.25])
