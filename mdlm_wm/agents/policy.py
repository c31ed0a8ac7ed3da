"""The behaviour-cloned policy as an `Agent`, loaded from its workdir.

    agent = load_agent("/tmp/agent")          # launch.train_agent's workdir, or agent GRPO's
    actions = agent.act(spec, history, observation, num_samples=4, seed=0)

A policy workdir is a world-model workdir (agents/bc.py) whose config has an
`agent` block; its samples are actions instead of next states.
"""

from __future__ import annotations

from collections.abc import Sequence

from mdlm_wm.agents.base import Agent, Turn, pad_to_bucket
from mdlm_wm.agents.bc import policy_transition
from mdlm_wm.world_model import Samples, WorldModel


class PolicyAgent(Agent):
  """An AR model over policy transitions; `params` (default: the loaded ones)
  lets agent GRPO act with the params it is training."""

  def __init__(self, model: WorldModel, params=None, **sample_overrides):
    if model.objective != "ar":
      raise ValueError(f"a policy is an AR model; this one is {model.objective!r}")
    self.model = model
    self.params = model.params if params is None else params
    self.sample_overrides = sample_overrides

  def sample(self, turns: Sequence[Turn], *, num_samples: int = 1, seed: int = 0,
             params=None) -> tuple[Samples, list[list[str]]]:
    """Token canvases (rows = turns) and texts of `num_samples` actions per
    turn, from one jitted decoder call; `params` overrides self.params."""
    transitions = pad_to_bucket([policy_transition(*turn) for turn in turns])
    samples = self.model.sample_tokens(
        transitions, num_samples=num_samples, seed=seed,
        params=self.params if params is None else params, **self.sample_overrides)
    samples = Samples(*(x[:len(turns)] for x in samples))
    return samples, [[a.strip() for a in row] for row in self.model.texts(samples)]

  def act_batch(self, turns: Sequence[Turn], *, num_samples: int = 1,
                seed: int = 0) -> list[list[str]]:
    return self.sample(turns, num_samples=num_samples, seed=seed)[1]


def load_agent(workdir: str, *, step: int | None = None, mesh=None,
               **sample_overrides) -> PolicyAgent:
  """The policy in `workdir` (latest checkpoint unless `step`); sampling
  settings (temperature, top_p) default to its config's `sample` block."""
  model = WorldModel.load(workdir, step=step, mesh=mesh)
  if "agent" not in model.cfg:
    raise ValueError(f"{workdir} holds a world model, not an agent (its config has no "
                     "`agent` block); train one with launch.train_agent")
  return PolicyAgent(model, **sample_overrides)
