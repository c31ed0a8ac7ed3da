"""Environments: the Env protocol, the registry and the built-in simulators."""

from mdlm_wm.envs.base import Env, StepResult, env_names, make, register, run_episode, state_check_fn

__all__ = ["Env", "StepResult", "env_names", "make", "register", "run_episode", "state_check_fn"]
