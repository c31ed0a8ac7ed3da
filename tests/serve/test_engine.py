"""The engine's batching contract, on a stub model (no JAX), and its anchor check."""

import ml_collections
import pytest

from mdlm_wm.data.delta import pinned_suffix
from mdlm_wm.data.schema import Spec
from mdlm_wm.data.serialize import Transition
from mdlm_wm.serve.engine import Engine, StepJob
from mdlm_wm.serve.protocol import RequestError, Sampling
from mdlm_wm.world_model import Anchors, WorldModel


class StubModel:
  """Records generate calls; sample g of a transition is '<action>/<g>'."""

  def __init__(self, objective="mdlm"):
    self.objective = objective
    self.cfg = ml_collections.ConfigDict({"sample": {"temperature": 0.7, "steps": 8}})
    self.calls = []

  def generate(self, transitions, *, num_samples, seed, steers, anchors, accept, **overrides):
    self.calls.append({"actions": [t.action for t in transitions], "seed": seed,
                       "steers": steers, "accept": accept, "overrides": overrides})
    return [[f"{t.action}/{g}" for g in range(num_samples)] for t in transitions]


def job(action: str, steer: str | None = None, seed: int = 0, env: str | None = None) -> StepJob:
  return StepJob(Transition(Spec("s0", "task"), (), "state", action), steer, None, seed, env)


def test_a_call_pads_to_a_power_of_two_and_returns_one_result_per_request():
  wm = StubModel()
  engine = Engine(wm)
  key = engine.batch_key(Sampling(num_samples=2))
  results = engine.run_steps(key, [job("a", "z", 7), job("b", seed=8), job("c", seed=9)])
  assert [r.next_states for r in results] == [["a/0", "a/1"], ["b/0", "b/1"], ["c/0", "c/1"]]
  assert all(r.batch_size == 3 for r in results)
  (call,) = wm.calls
  assert call["actions"] == ["a", "b", "c", "a"] and call["steers"] == ["z", None, None, "z"]
  assert call["seed"] == [7, 8, 9, 7]  # one seed per transition: batch-mates cannot interfere
  assert call["overrides"] == {"temperature": 0.7, "steps": 8}
  assert len(engine.run_steps(key, [job(str(i)) for i in range(5)])) == 5
  assert len(wm.calls[-1]["actions"]) == 8


def test_defaults_batch_with_explicit_defaults_and_seeds_never_split_batches():
  engine = Engine(StubModel())
  assert engine.batch_key(Sampling()) == engine.batch_key(Sampling(temperature=0.7, steps=8))
  assert engine.batch_key(Sampling(seed=1)) == engine.batch_key(Sampling(seed=2))
  assert engine.batch_key(Sampling()) != engine.batch_key(Sampling(temperature=0.5))
  assert engine.batch_key(Sampling()) != engine.batch_key(Sampling(num_samples=2))


def test_ar_models_get_no_steps_override():
  wm = StubModel("ar")
  engine = Engine(wm)
  key = engine.batch_key(Sampling())
  assert key.steps is None
  engine.run_steps(key, [job("a")])
  assert wm.calls[-1]["overrides"] == {"temperature": 0.7}


def test_a_job_that_names_its_environment_passes_its_parser():
  wm = StubModel()
  engine = Engine(wm)
  engine.run_steps(engine.batch_key(Sampling()), [job("a", env="files"), job("b")])
  parse, none = wm.calls[-1]["accept"][:2]
  assert none is None
  assert parse("[cwd: /home | entries: 1 (files: 0, dirs: 1) | exit: 0 | goal: 0/3]")
  assert not parse("[cwd: /home | entries: 1/2")


def test_anchors_are_checked_as_a_delta_model_pins_them(tiny_models):
  wm = WorldModel.load(tiny_models["mdlm"])
  wm.cfg.data.target = "delta"
  state = "You wait. [room: den | at: sofa | holding: nothing | visible: 0]"
  anchor = "[room: den | at: sofa | holding: key | visible: 0]"  # pinned as [= | holding: key]
  fixed = Anchors(suffix=anchor, length=len(wm.tokenizer.encode(pinned_suffix(anchor, state))))
  engine = Engine(wm)
  engine.check(Sampling(), fixed, state)
  with pytest.raises(RequestError, match="fixed: anchors need"):
    engine.check(Sampling(), fixed)  # without s_t the whole line is pinned: it does not fit
