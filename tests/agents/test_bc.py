"""Behaviour cloning: the policy corpus, training, loading and acting."""

import json
import os

import numpy as np
import pytest

from mdlm_wm import envs
from mdlm_wm.agents import bc, load_agent
from mdlm_wm.data import schema
from mdlm_wm.data.serialize import Serializer, transition_at
from mdlm_wm.data.tokenizer import Tokenizer
from tests.agents.conftest import BC_STEPS


def test_policy_transition_agrees_with_the_rewritten_episode(tiny_corpus):
  ep, _ = envs.run_episode(envs.make("household"), seed=3, policy="expert")
  policy_ep = bc.policy_episode(ep)
  history = [(s.state, s.action) for s in ep.steps]
  tok = Tokenizer.load(f"{tiny_corpus}/tokenizer.model")
  for history_len in (0, 1, 2):
    ser = Serializer(tok, 2048, 64, history_len)
    for k, step in enumerate(ep.steps):
      live = bc.policy_transition(ep.spec, tuple(history[:k]), step.state, step.action)
      trained = ser.serialize(transition_at(policy_ep, k, history_len))
      assert ser.serialize(live) == trained
      assert tok.decode_target(trained.target_ids) == step.action
  # The context shows the previous action after the current observation.
  last = bc.policy_transition(ep.spec, tuple(history[:2]), ep.steps[2].state)
  assert (last.state, last.action, last.next_state) == (ep.steps[2].state, ep.steps[1].action, "")
  assert last.history == ((ep.steps[0].state, ""), (ep.steps[1].state, ep.steps[0].action))


def test_policy_corpus_targets_are_the_expert_actions(tiny_corpus, tmp_path):
  source = f"{tiny_corpus}/train.jsonl"
  out = str(tmp_path / "policy.jsonl")
  counts = bc.policy_corpus(source, out)
  experts = [ep for ep in schema.iter_episodes(source)
             if ep.meta["policy"] == "expert" and ep.meta["success"]]
  written = list(schema.iter_episodes(out))
  assert counts == {"episodes_in": len(list(schema.iter_episodes(source))),
                    "episodes": len(experts), "steps": sum(len(ep.steps) for ep in experts)}
  assert len(written) == len(experts) > 0
  for src, pol in zip(experts, written):
    assert (pol.env, pol.spec, pol.meta["source"]) == (src.env, src.spec, src.id)
    assert [s.next_state for s in pol.steps] == [s.action for s in src.steps]
    assert [s.state for s in pol.steps] == [s.state for s in src.steps]
    assert [s.action for s in pol.steps] == [""] + [s.action for s in src.steps[:-1]]
  # Deterministic: a resumed run rebuilds the same bytes.
  again = str(tmp_path / "again.jsonl")
  bc.policy_corpus(source, again)
  assert open(out, "rb").read() == open(again, "rb").read()


def test_policy_corpus_rejects_unknown_or_empty_selections(tiny_corpus, tmp_path):
  out = str(tmp_path / "p.jsonl")
  with pytest.raises(ValueError, match="unknown policies"):
    bc.policy_corpus(f"{tiny_corpus}/train.jsonl", out, ("oracle",))
  # Random episodes never succeed here, so success_only keeps none of them.
  with pytest.raises(ValueError, match="no episode"):
    bc.policy_corpus(f"{tiny_corpus}/train.jsonl", out, ("random",))
  assert not os.path.exists(out)


@pytest.mark.slow
def test_bc_training_loss_falls(tiny_agent):
  with open(os.path.join(tiny_agent, "metrics.jsonl")) as f:
    losses = [row["loss"] for row in map(json.loads, f) if "loss" in row]
  assert len(losses) == BC_STEPS
  # Measured: 6.29 -> 4.90 (mean of the last 3); chance is ln(512) = 6.24.
  assert np.mean(losses[-3:]) < losses[0] - 0.8, losses
  assert os.path.exists(os.path.join(tiny_agent, bc.POLICY_DATA_DIR, "train.jsonl"))


def test_load_agent_acts_and_rejects_world_models(tiny_agent, tiny_models):
  agent = load_agent(tiny_agent, temperature=1.0)
  spec, obs = envs.make("files").reset(700_000)
  actions = agent.act(spec, [], obs, num_samples=3, seed=0)
  assert len(actions) == 3 and all(isinstance(a, str) for a in actions)
  assert agent.act(spec, [], obs, num_samples=3, seed=0) == actions
  with pytest.raises(ValueError, match="not an agent"):
    load_agent(tiny_models["ar"])
