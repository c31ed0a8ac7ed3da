"""The tasks an agent trains and is evaluated on: environment names and world seeds.

An `--env` value names one environment or several, comma-separated: a
built-in (`household`), a real task (`scienceworld/boil`) or a real family
(`scienceworld`: every task it has). A split's seeds are the environment's
own `split_seeds(split)` for real environments; built-ins take fixed blocks
of world seeds, train 700,000+, valid 800,000+ and test 900,000+, which no
corpus of fewer than 700,000 episodes per environment reaches (mdlm_wm/corpus/
uses seed * 1,000,000 + [0, episodes_per_env)): an agent cloned from a corpus
is never evaluated on a world it was cloned on.
"""

from __future__ import annotations

from mdlm_wm import envs
from mdlm_wm.envs import adapters
from mdlm_wm.envs.adapters.base import check_split

BUILTIN_SPLIT_START = {"train": 700_000, "valid": 800_000, "test": 900_000}


def env_names(spec: str) -> list[str]:
  """The environment names `spec` stands for, in order, without repeats."""
  names = []
  for part in (p.strip() for p in spec.split(",")):
    if not part:
      continue
    if "/" in part:
      names.append(part)
    elif part in adapters.families():
      names += [f"{part}/{task}" for task in adapters.tasks(part)]
    elif part in envs.env_names():
      names.append(part)
    else:
      raise KeyError(f"unknown environment {part!r}; built-ins: {', '.join(envs.env_names())}; "
                     f"real families: {', '.join(adapters.families())}")
  if not names:
    raise ValueError(f"no environment in {spec!r}")
  return list(dict.fromkeys(names))


def split_seeds(name: str, split: str, count: int) -> list[int]:
  """Up to `count` seeds of `split` for environment `name` (fewer when a real
  environment's split is smaller)."""
  check_split(split)
  if count < 1:
    raise ValueError(f"count must be >= 1, got {count}")
  if not adapters.is_real(name):
    return [BUILTIN_SPLIT_START[split] + i for i in range(count)]
  env = envs.make(name)
  try:
    return list(env.split_seeds(split))[:count]
  finally:
    env.close()


def task_list(spec: str, split: str, per_env: int) -> list[tuple[str, int]]:
  """(environment, seed) of up to `per_env` tasks of `split` per environment."""
  return [(name, seed) for name in env_names(spec) for seed in split_seeds(name, split, per_env)]
