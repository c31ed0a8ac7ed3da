"""Behaviour cloning: a text policy is an AR world model of a rewritten corpus.

A world model maps (spec, history, state, action) to the next state; a
policy maps (spec, history, observation) to the next action. Rewriting every
step k of an expert episode as

    state      = the observation o_k
    action     = the previous action a_{k-1}  ("" at the first step)
    next_state = a_k, the action to learn

turns the second into the first, so the whole world-model stack trains and
serves the policy unchanged: tokenizer, serializer and its counted
truncation, packing, the sharded trainer and its checkpoints, the KV-cache
decoder, and GRPO's exact `ar_logprob`.

Why the previous action goes in the action slot: the serializer builds a
step's history from the earlier steps' (state, action) fields, so those must
carry the actions for the history to show them. A context then reads

    <spec> ... <state> o_{k-1} <action> a_{k-2} <state> o_k <action> a_{k-1} <target>

every observation of the window followed by the action that led to it, and
the target is a_k <eot>. `policy_transition` builds exactly this from a live
episode, and `transition_at` on a rewritten episode gives the same thing
(tests/agents/test_bc.py), so training and acting agree by construction.
"""

from __future__ import annotations

import copy
import os
import shutil
from collections.abc import Sequence

from mdlm_wm import config as config_lib
from mdlm_wm import envs
from mdlm_wm.agents.base import History
from mdlm_wm.data import schema
from mdlm_wm.data.schema import Episode, Spec, Step
from mdlm_wm.data.serialize import Transition
from mdlm_wm.train import state as train_state
from mdlm_wm.train import trainer

POLICY_DATA_DIR = "policy_data"
# Splits of a corpus directory (mdlm_wm/corpus/) that become policy data.
SPLITS = ("train", "valid")


def policy_transition(spec: Spec, history: History, observation: str,
                      target: str = "") -> Transition:
  """The policy's example at `observation` after `history` ((observation,
  action) pairs); `target` is the action to learn ("" when acting)."""
  previous = [""] + [action for _, action in history]
  pairs = tuple((obs, previous[i]) for i, (obs, _) in enumerate(history))
  return Transition(spec, pairs, observation, previous[-1], target)


def policy_episode(ep: Episode) -> Episode:
  """`ep` rewritten into policy steps (module docstring); same spec and env."""
  previous = [""] + [s.action for s in ep.steps]
  steps = tuple(Step(state=s.state, action=previous[k], next_state=s.action, reward=s.reward,
                     done=s.done) for k, s in enumerate(ep.steps))
  return Episode(id=f"{ep.id}/policy", env=ep.env, spec=ep.spec, steps=steps,
                 meta={**ep.meta, "source": ep.id, "kind": "policy"})


def policy_corpus(in_path: str, out_path: str, policies: Sequence[str] = ("expert",), *,
                  success_only: bool = True) -> dict[str, int]:
  """Writes the policy episodes of `in_path`'s episodes whose `meta.policy` is in
  `policies` (and that succeeded, with `success_only`) to `out_path`.

  Returns counts: episodes read, episodes written, steps written. Raises
  ValueError when nothing is kept (an empty file is not a corpus).
  """
  unknown = set(policies) - set(envs.POLICIES)
  if unknown:
    raise ValueError(f"unknown policies {sorted(unknown)}; known: {envs.POLICIES}")
  counts = {"episodes_in": 0, "episodes": 0, "steps": 0}

  def kept():
    for ep in schema.iter_episodes(in_path):
      counts["episodes_in"] += 1
      if ep.meta.get("policy") in policies and (ep.meta.get("success") or not success_only):
        counts["episodes"] += 1
        counts["steps"] += len(ep.steps)
        yield policy_episode(ep)

  os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
  schema.write_episodes(out_path, kept())
  if not counts["episodes"]:
    os.remove(out_path)
    raise ValueError(f"{in_path}: no episode of policies {list(policies)}"
                     f"{' that succeeded' if success_only else ''} among {counts['episodes_in']}")
  return counts


def build_policy_data(corpus_dir: str, out_dir: str, policies: Sequence[str] = ("expert",), *,
                      success_only: bool = True) -> dict[str, str]:
  """The policy data of a corpus directory: `train.jsonl` (required),
  `valid.jsonl` (when the corpus has one) and the corpus's tokenizer, under
  `out_dir`. Returns {split or "tokenizer": path}. Deterministic, so
  rebuilding it for a resumed run gives the same bytes."""
  out = {}
  for split in SPLITS:
    source = os.path.join(corpus_dir, f"{split}.jsonl")
    if split != "train" and not os.path.exists(source):
      continue
    out[split] = os.path.join(out_dir, f"{split}.jsonl")
    counts = policy_corpus(source, out[split], policies, success_only=success_only)
    print(f"policy data {split}: {counts['episodes']} of {counts['episodes_in']} episodes, "
          f"{counts['steps']} steps", flush=True)
  out["tokenizer"] = os.path.join(out_dir, train_state.TOKENIZER_FILE)
  shutil.copyfile(os.path.join(corpus_dir, train_state.TOKENIZER_FILE), out["tokenizer"])
  return out


def train_bc(cfg, corpus_dir: str, workdir: str, *, max_steps: int | None = None
             ) -> trainer.TrainResult:
  """Behaviour-clones a policy from `corpus_dir` into `workdir` (resumable).

  `cfg` is an agent config (configs/agent_bc.py: objective "ar" and an
  `agent` block naming the policies to clone); its data paths are set here.
  """
  config_lib.validate(cfg)  # before writing data for a run that cannot start
  if cfg.objective != "ar":
    raise ValueError(f"config.objective: a policy is trained with 'ar', got {cfg.objective!r}")
  if "agent" not in cfg:
    raise ValueError("config.agent: missing; start from configs/agent_bc.py")
  policies = [p.strip() for p in cfg.agent.policies.split(",") if p.strip()]
  paths = build_policy_data(corpus_dir, os.path.join(workdir, POLICY_DATA_DIR), policies,
                            success_only=cfg.agent.success_only)
  cfg = copy.deepcopy(cfg)
  cfg.data.train = paths["train"]
  cfg.data.valid = paths.get("valid", "")
  cfg.data.tokenizer = paths["tokenizer"]
  return trainer.train(cfg, workdir, max_steps=max_steps)
