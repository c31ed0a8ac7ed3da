"""Environments: the Env protocol, the registry and the built-in simulators."""

from mdlm_wm.envs.base import POLICIES, Env, StepResult, run_episode
from mdlm_wm.envs.registry import env_names, make, register, state_check_fn

__all__ = ["POLICIES", "Env", "StepResult", "env_names", "make", "register", "run_episode",
           "state_check_fn"]
