"""Builds a trajectory corpus from environments: splits, policy mix, tokenizer, stats.

The corpus builders sit above the environments they play (docs/design.md,
"Layers"): this module builds corpora of the built-in environments and holds
the corpus-directory helpers (split files, tokenizer, stats.json) that
`real.py` (real engines) and `merge.py` share.

Seeds are disjoint across splits by construction: episode i of an
environment uses world seed `seed * SEED_STRIDE + i`, with indices
[0, n_train) for train, then valid, then test. Held-out environments put all
their episodes in `heldout_env.jsonl` and none in the other splits. Output is
a pure function of the configuration: the same config gives byte-identical
files (no timestamps, fixed key order, single-threaded tokenizer training).
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence

from mdlm_wm.data import schema, stats as stats_lib
from mdlm_wm.data.schema import SPLITS
from mdlm_wm.data.serialize import render_rules, render_tools
from mdlm_wm.data.tokenizer import Tokenizer, train_tokenizer
from mdlm_wm.envs import base, registry
from mdlm_wm.utils.progress import Progress

SEED_STRIDE = 1_000_000
HELDOUT = "heldout_env"
TOKENIZER_FILE = "tokenizer.model"


@dataclasses.dataclass(frozen=True)
class CorpusConfig:
  envs: Sequence[str]
  episodes_per_env: int
  seed: int = 0
  holdout_envs: Sequence[str] = ()
  policy_mix: Mapping[str, float] = dataclasses.field(
      default_factory=lambda: {"expert": 0.5, "noisy": 0.3, "random": 0.2})
  noise: float = 0.3
  valid_fraction: float = 0.1
  test_fraction: float = 0.1
  tokenizer_vocab: int = 4096  # 0: no tokenizer

  @classmethod
  def from_config(cls, cd) -> CorpusConfig:
    """From an ml_collections `corpus` block (comma-separated env lists)."""
    names = lambda s: [x.strip() for x in s.split(",") if x.strip()]
    envs = registry.env_names() if cd.envs == "all" else names(cd.envs)
    holdout = names(cd.holdout_envs)
    return cls(envs=list(dict.fromkeys(envs + holdout)), episodes_per_env=cd.episodes_per_env,
               seed=cd.seed, holdout_envs=holdout, tokenizer_vocab=cd.tokenizer_vocab)

  def validate(self) -> None:
    known = registry.env_names()
    for name in list(self.envs) + list(self.holdout_envs):
      if name not in known:
        raise ValueError(f"unknown environment {name!r}; known: {', '.join(known)}")
    if self.episodes_per_env < 1:
      raise ValueError("episodes_per_env must be >= 1")
    if self.episodes_per_env >= SEED_STRIDE:
      raise ValueError(f"episodes_per_env must be < {SEED_STRIDE}")
    check_policy_mix(self.policy_mix)
    if not 0 <= self.valid_fraction + self.test_fraction < 1:
      raise ValueError("valid_fraction + test_fraction must be in [0, 1)")
    needed = 1 + bool(self.valid_fraction) + bool(self.test_fraction)
    if self.episodes_per_env < needed:
      raise ValueError(f"episodes_per_env must be >= {needed} so no split is empty")
    if not 0 <= self.noise <= 1:
      raise ValueError("noise must be in [0, 1]")
    if self.holdout_envs and set(self.holdout_envs) >= set(self.envs):
      raise ValueError("every environment is held out: nothing left to train on")


def config_dict(cfg: CorpusConfig) -> dict:
  """The config as stats.json records it (JSON types only)."""
  return {**dataclasses.asdict(cfg), "envs": list(cfg.envs),
          "holdout_envs": list(cfg.holdout_envs), "policy_mix": dict(cfg.policy_mix)}


def split_ranges(cfg: CorpusConfig) -> dict[str, tuple[int, int]]:
  """Episode index ranges [start, stop) of each split."""
  n = cfg.episodes_per_env
  # A split asked for is never empty: its file would not be a valid corpus.
  n_valid = max(1, round(n * cfg.valid_fraction)) if cfg.valid_fraction else 0
  n_test = max(1, round(n * cfg.test_fraction)) if cfg.test_fraction else 0
  n_train = n - n_valid - n_test
  return {"train": (0, n_train), "valid": (n_train, n_train + n_valid),
          "test": (n_train + n_valid, n)}


def check_policy_mix(policy_mix: Mapping[str, float]) -> None:
  """Raises ValueError unless the mix gives non-negative weights, not all zero,
  to known policies."""
  bad = [p for p in policy_mix if p not in base.POLICIES]
  if bad or not policy_mix or min(policy_mix.values()) < 0 or sum(policy_mix.values()) <= 0:
    raise ValueError(f"policy_mix must give non-negative weights to {base.POLICIES}, "
                     f"got {dict(policy_mix)}")


def pick_policy(policy_mix: Mapping[str, float], key: str) -> str:
  """A policy drawn from the mix by a stream seeded with `key` (deterministic)."""
  names = sorted(policy_mix)
  rng = random.Random(key)
  return rng.choices(names, weights=[policy_mix[p] for p in names])[0]


def _policy(cfg: CorpusConfig, env: str, index: int) -> str:
  return pick_policy(cfg.policy_mix, f"policy/{cfg.seed}/{env}/{index}")


def generate(cfg: CorpusConfig, env_name: str, start: int, stop: int,
             progress: Progress | None = None) -> Iterator[schema.Episode]:
  """Episodes [start, stop) of one environment (deterministic)."""
  env = registry.make(env_name)
  for i in range(start, stop):
    seed = cfg.seed * SEED_STRIDE + i
    policy = _policy(cfg, env_name, i)
    ep, _ = base.run_episode(env, seed, policy, noise=cfg.noise,
                             episode_id=f"{env_name}/seed-{seed}/{policy}")
    if progress:
      progress.update()
    yield ep


def _texts(path: str) -> Iterator[str]:
  """Unique texts of a corpus file, in first-seen order, for tokenizer training."""
  seen = set()
  for ep in schema.iter_episodes(path):
    spec = ep.spec
    candidates = [spec.initial_state, spec.task, render_tools(spec.tools),
                  render_rules(spec.rules), spec.steer]
    for s in ep.steps:
      candidates += [s.state, s.action, s.next_state]
    for t in candidates:
      if t and t not in seen:
        seen.add(t)
        yield t


def build_corpus(cfg: CorpusConfig, out_dir: str, *, verbose: bool = True) -> dict:
  """Writes the split files, the tokenizer and stats.json; returns the stats."""
  cfg.validate()
  os.makedirs(out_dir, exist_ok=True)
  ranges = split_ranges(cfg)
  train_envs = [e for e in cfg.envs if e not in cfg.holdout_envs]
  files = {split: [(e, *ranges[split]) for e in train_envs] for split in SPLITS
           if ranges[split][1] > ranges[split][0]}
  if cfg.holdout_envs:
    files[HELDOUT] = [(e, 0, cfg.episodes_per_env) for e in cfg.holdout_envs]
  remove_stale(out_dir, files, cfg.tokenizer_vocab)
  total = sum(stop - start for jobs in files.values() for _, start, stop in jobs)
  progress = Progress("build_corpus", total, "episodes") if verbose else None
  t0 = time.perf_counter()
  for split, jobs in files.items():
    episodes = (ep for env, start, stop in jobs
                for ep in generate(cfg, env, start, stop, progress))
    schema.write_episodes(os.path.join(out_dir, f"{split}.jsonl"), episodes)
  gen_seconds = time.perf_counter() - t0
  if progress:
    progress.close()

  tokenizer = train_split_tokenizer(out_dir, cfg.tokenizer_vocab)
  env_stats = split_stats(out_dir, files, tokenizer)
  per_split = {split: {env: s.summary(tokenizer is not None) for env, s in sorted(st.items())}
               for split, st in env_stats.items()}
  result = {
      "config": config_dict(cfg),
      "splits": {split: {"envs": [env for env, _, _ in jobs],
                         "episode_index_range": list(jobs[0][1:]) if jobs else None,
                         "world_seeds": ([cfg.seed * SEED_STRIDE + jobs[0][1],
                                          cfg.seed * SEED_STRIDE + jobs[0][2]] if jobs else None)}
                 for split, jobs in files.items()},
      "stats": per_split,
      "tokenizer": ({"file": TOKENIZER_FILE, "vocab_size": tokenizer.vocab_size}
                    if tokenizer else None),
  }
  write_json(os.path.join(out_dir, "stats.json"), result)
  # Timing and live objects go to the caller, not into stats.json, which must
  # be reproducible.
  result["episodes_per_second"] = total / max(gen_seconds, 1e-9)
  result["env_stats"] = env_stats
  return result


def remove_stale(out_dir: str, splits: Iterable[str], tokenizer_vocab: int) -> None:
  """Deletes the split files not in `splits` and, without a tokenizer
  (`tokenizer_vocab` 0), the tokenizer: a rebuild must not leave files of an
  earlier configuration behind."""
  stale = [f"{split}.jsonl" for split in (*SPLITS, HELDOUT) if split not in splits]
  for name in stale + ([] if tokenizer_vocab else [TOKENIZER_FILE]):
    if os.path.exists(os.path.join(out_dir, name)):
      os.remove(os.path.join(out_dir, name))


def train_split_tokenizer(out_dir: str, vocab_size: int) -> Tokenizer | None:
  """Trains the tokenizer on `out_dir`/train.jsonl and saves it there (0: none)."""
  if not vocab_size:
    return None
  tokenizer = train_tokenizer(_texts(os.path.join(out_dir, "train.jsonl")), vocab_size)
  tokenizer.save(os.path.join(out_dir, TOKENIZER_FILE))
  return tokenizer


def split_stats(out_dir: str, splits: Iterable[str],
                tokenizer: Tokenizer | None) -> dict[str, dict[str, stats_lib.EnvStats]]:
  """Per-split, per-environment statistics of the written files; reading them
  back validates every line against the schema."""
  return {split: stats_lib.collect(
      schema.iter_episodes(os.path.join(out_dir, f"{split}.jsonl")), tokenizer) for split in splits}


def write_json(path: str, obj: dict) -> None:
  """Sorted, indented JSON, written to a temporary name and moved into place."""
  tmp = path + ".tmp"
  with open(tmp, "w", encoding="utf-8") as f:
    json.dump(obj, f, indent=2, sort_keys=True)
    f.write("\n")
  os.replace(tmp, path)


def format_summary(result: dict) -> str:
  """Per-split statistics tables, tokenizer size and generation speed."""
  with_tokens = result["tokenizer"] is not None
  parts = []
  for split, per_env in result["env_stats"].items():
    parts += [f"== {split} ==", stats_lib.format_table(per_env, with_tokens), ""]
  if with_tokens:
    parts.append(f"tokenizer: {result['tokenizer']['vocab_size']} pieces")
  parts.append(f"generation speed: {result['episodes_per_second']:.1f} episodes/s")
  return "\n".join(parts)
