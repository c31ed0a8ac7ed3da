"""Agents: text policies that act in real environments and in world models.

  Agent, Turn, CallableAgent   the protocol, and any Python callable as an agent
  ExpertAgent, RandomAgent     the environment's own policies (replayed), as baselines
  PolicyAgent, load_agent      a behaviour-cloned AR policy (agents/bc.py) from its workdir

Modules: bc (policy data and behaviour cloning), evaluate (an agent in the
real environment, with 95% CIs), grpo (agent GRPO inside a world model or
the real environment), episodes (the loop both play episodes with),
success (task-success predicates on state text), tasks (environments and
their split seeds).
"""

from mdlm_wm.agents.base import Agent, CallableAgent, Turn
from mdlm_wm.agents.baselines import ExpertAgent, RandomAgent
from mdlm_wm.agents.policy import PolicyAgent, load_agent

__all__ = ["Agent", "CallableAgent", "ExpertAgent", "PolicyAgent", "RandomAgent", "Turn",
           "load_agent"]
