"""Environments by name: the built-in ones, real ones (`family/task`) and a user's own.

The registry sits above every environment module: it imports the built-in
environments and the adapters, never the other way round, so an environment
module imports only `envs/base.py` (and `toolcall.py`).
"""

from __future__ import annotations

from collections.abc import Callable

from mdlm_wm.checks.result import CheckResult
from mdlm_wm.data.schema import Spec, Step
from mdlm_wm.envs import adapters, calendar_apps, files, household, lab, shop
from mdlm_wm.envs.base import Env

BUILTIN: tuple[type[Env], ...] = (calendar_apps.CalendarAppsEnv, files.FilesEnv,
                                  household.HouseholdEnv, lab.LabEnv, shop.ShopEnv)

_REGISTRY: dict[str, type[Env]] = {}


def register(cls: type[Env]) -> type[Env]:
  """Adds an environment class under its `name` (usable as a class decorator)."""
  if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
    raise ValueError(f"environment {cls.name!r} registered twice")
  _REGISTRY[cls.name] = cls
  return cls


for _cls in BUILTIN:
  register(_cls)


def env_names() -> list[str]:
  """The registered (built-in and user) environments; real ones are `family/task` names."""
  return sorted(_REGISTRY)


def make(name: str) -> Env:
  """A registered environment, or a real one by its `family/task` name."""
  if "/" in name:
    return adapters.make(name)
  return env_class(name)()


def env_class(name: str) -> type[Env]:
  """The class of environment `name` (built-in, user or `family/task`)."""
  if "/" in name:
    return adapters.env_class(name.split("/", 1)[0])
  if name not in _REGISTRY:
    raise KeyError(f"unknown environment {name!r}; known: {', '.join(sorted(_REGISTRY))}")
  return _REGISTRY[name]


def is_known(name: str) -> bool:
  """True for a registered environment or a real one's `family/task` name."""
  return name in _REGISTRY or adapters.is_real(name)


def state_check_fn(name: str) -> Callable[[Spec, Step, str], float]:
  """The state-check callback of environment `name` (real environments are
  checked on their status-line facts)."""
  return env_class(name).state_check


def check_fn(name: str) -> Callable[[Spec, Step, str], CheckResult]:
  """The structured checker (`Env.check`) of environment `name`."""
  return env_class(name).check
