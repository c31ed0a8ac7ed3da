"""Real environments behind adapters: `make("family/task")`, `families()`.

Each family lives in its own module, imported on first use, so the package
imports without the engines installed; a missing engine is an ImportError
that says which extra to install.
"""

from __future__ import annotations

import importlib

from mdlm_wm.envs.adapters.base import RealEnv

# family -> module defining exactly one RealEnv subclass with that `family`.
_MODULES = {
    "textworld": "mdlm_wm.envs.adapters.textworld_env",
    "textworld_express": "mdlm_wm.envs.adapters.twx_env",
    "scienceworld": "mdlm_wm.envs.adapters.scienceworld_env",
    "alfworld": "mdlm_wm.envs.adapters.alfworld_env",
}


def families() -> list[str]:
  return sorted(_MODULES)


def is_real(name: str) -> bool:
  """True for `family/task` names of real environments."""
  return name.split("/", 1)[0] in _MODULES and "/" in name


def env_class(family: str) -> type[RealEnv]:
  if family not in _MODULES:
    raise KeyError(f"unknown real environment family {family!r}; known: {', '.join(families())}")
  try:
    module = importlib.import_module(_MODULES[family])
  except ImportError as e:
    raise ImportError(f"{family} needs its engine: pip install -e '.[envs]' ({e})") from e
  classes = [c for c in vars(module).values()
             if isinstance(c, type) and issubclass(c, RealEnv) and getattr(c, "family", None) == family]
  if len(classes) != 1:
    raise RuntimeError(f"{_MODULES[family]} must define one RealEnv with family {family!r}")
  return classes[0]


def make(name: str) -> RealEnv:
  """The adapter for `family/task`."""
  family, _, task = name.partition("/")
  return env_class(family)(task)


def tasks(family: str) -> list[str]:
  return env_class(family).tasks()
