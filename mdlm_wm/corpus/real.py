"""Builds a trajectory corpus from real environments (any `RealEnv` family).

For every family and task (all of a family's tasks unless the config names
some), the builder asks the adapter for each split's seeds
(`split_seeds`: the engine's own folds or variations where it has them,
disjoint seed ranges otherwise), draws `episodes[split]` of them without
replacement by a stream keyed on the corpus seed, and plays one episode per
seed with `envs.base.run_episode`, the policy drawn from the mix per (task,
split, index) as the built-in corpus does. A task with fewer seeds than asked
plays all of them; stats.json says how many.

A game that raises (an engine exception) is logged with family / task /
split / seed, skipped and counted; the adapter is closed and made anew, so a
broken engine process cannot spoil the games after it.

Outputs: train.jsonl / valid.jsonl / test.jsonl (read back, so validated
against docs/schema.md), tokenizer.model (trained on train.jsonl, as the built-in
corpus's is) and stats.json: the config, each task's seeds per split, counts
per family (episodes, transitions, successes, failed actions, crashed
games), per-split statistics per environment, the crashes, and a `timing`
block (episodes/min per family and policy). The split files and the
tokenizer are byte-identical for the same config and engine versions;
stats.json differs only in `timing`.
"""

from __future__ import annotations

import dataclasses
import os
import random
import time
from collections.abc import Mapping, Sequence

from absl import logging

from mdlm_wm import corpus
from mdlm_wm.data import schema, stats as stats_lib
from mdlm_wm.data.schema import SPLITS
from mdlm_wm.envs import adapters, base
from mdlm_wm.envs.adapters.base import RealEnv
from mdlm_wm.utils.progress import Progress

# Crash messages are cut to this many characters in stats.json.
_MAX_ERROR_CHARS = 300


@dataclasses.dataclass(frozen=True)
class RealCorpusConfig:
  # Family -> tasks to play (empty: all of the family's tasks).
  envs: Mapping[str, Sequence[str]]
  # Split -> episodes per task (a split left out, or 0, is not built).
  episodes: Mapping[str, int] = dataclasses.field(
      default_factory=lambda: {"train": 10, "valid": 2, "test": 2})
  seed: int = 0
  policy_mix: Mapping[str, float] = dataclasses.field(
      default_factory=lambda: {"expert": 0.5, "noisy": 0.3, "random": 0.2})
  noise: float = 0.3
  tokenizer_vocab: int = 4096  # 0: no tokenizer
  # Episode length limit; None: each adapter's own `max_steps`.
  max_steps: int | None = None

  def validate(self) -> None:
    """Checks the config; imports each family's engine (ImportError if missing)."""
    if not self.envs:
      raise ValueError("no real environment families given")
    for family, chosen in self.envs.items():
      known = adapters.tasks(family)
      unknown = [t for t in chosen if t not in known]
      if unknown:
        raise ValueError(f"unknown {family} tasks {unknown}; known: {', '.join(known)}")
    bad = [s for s in self.episodes if s not in SPLITS]
    if bad or any(n < 0 for n in self.episodes.values()):
      raise ValueError(f"episodes must map splits {SPLITS} to counts >= 0, "
                       f"got {dict(self.episodes)}")
    if self.tokenizer_vocab and not self.episodes.get("train"):
      raise ValueError("a tokenizer is trained on the train split: give it episodes "
                       "(or set tokenizer_vocab=0)")
    if not any(self.episodes.values()):
      raise ValueError("every split has 0 episodes")
    corpus.check_policy_mix(self.policy_mix)
    if not 0 <= self.noise <= 1:
      raise ValueError("noise must be in [0, 1]")
    if self.max_steps is not None and self.max_steps < 1:
      raise ValueError("max_steps must be >= 1")

  def tasks(self) -> dict[str, list[str]]:
    """Family -> the tasks this config plays, in a fixed order."""
    return {family: sorted(chosen) if chosen else adapters.tasks(family)
            for family, chosen in sorted(self.envs.items())}

  def splits(self) -> list[str]:
    return [s for s in SPLITS if self.episodes.get(s)]


def parse_envs(names: Sequence[str]) -> dict[str, tuple[str, ...]]:
  """`family`, `family:task1+task2` or `family/task` -> {family: tasks} (() = all)."""
  out: dict[str, tuple[str, ...]] = {}
  for name in names:
    family, _, tasks = name.replace("/", ":", 1).partition(":")
    if family not in adapters.families():
      raise ValueError(f"{family!r} is not a real environment family; known: "
                       f"{', '.join(adapters.families())}")
    chosen = tuple(t for t in tasks.split("+") if t)
    if family in out and (not out[family] or not chosen):
      out[family] = ()
    else:
      out[family] = tuple(dict.fromkeys(out.get(family, ()) + chosen))
  return out


def config_dict(cfg: RealCorpusConfig) -> dict:
  """The config as stats.json records it (JSON types only)."""
  return {**dataclasses.asdict(cfg), "envs": {f: list(t) for f, t in sorted(cfg.envs.items())},
          "episodes": dict(cfg.episodes), "policy_mix": dict(cfg.policy_mix)}


@dataclasses.dataclass
class _Counts:
  episodes: int = 0
  transitions: int = 0
  successes: int = 0
  failed_actions: int = 0
  crashed_games: int = 0


class _SplitWriters:
  """One temporary JSONL file per split, moved into place on `commit`, so a
  failed build never leaves a half file under a final name."""

  def __init__(self, out_dir: str, splits: Sequence[str]):
    self.paths = {s: os.path.join(out_dir, f"{s}.jsonl") for s in splits}
    self.files = {s: open(p + ".tmp", "w", encoding="utf-8", newline="\n")
                  for s, p in self.paths.items()}
    self.counts = dict.fromkeys(splits, 0)

  def write(self, split: str, ep: schema.Episode) -> None:
    self.files[split].write(schema.episode_to_json(ep) + "\n")
    self.counts[split] += 1

  def commit(self) -> list[str]:
    """Closes the files; returns the splits with episodes (empty ones are dropped)."""
    written = []
    for split, f in self.files.items():
      f.close()
      if self.counts[split]:
        os.replace(f.name, self.paths[split])
        written.append(split)
      else:
        os.remove(f.name)
    return written

  def abort(self) -> None:
    for f in self.files.values():
      f.close()
      os.remove(f.name)


def _close(env: RealEnv) -> None:
  try:
    env.close()
  except Exception as e:  # a crashed engine may fail to shut down; it is replaced anyway
    logging.warning("closing %s failed: %s", env.name, e)


class _Player:
  """Plays every task's episodes into the split writers and keeps the tallies."""

  def __init__(self, cfg: RealCorpusConfig, writers: _SplitWriters, progress: Progress | None):
    self.cfg, self.writers, self.progress = cfg, writers, progress
    self.counts = {family: _Counts() for family in cfg.tasks()}
    # Family -> policy -> [episodes, seconds].
    self.timing: dict[str, dict[str, list[float]]] = {family: {} for family in self.counts}
    self.crashes: list[dict] = []

  def play_task(self, family: str, task: str) -> dict:
    """All splits of one task; returns its seeds per split (available, played)."""
    env = adapters.make(f"{family}/{task}")
    seeds = {}
    try:
      for split in self.cfg.splits():
        available = env.split_seeds(split)
        n = min(self.cfg.episodes[split], len(available))
        played = random.Random(f"seeds/{self.cfg.seed}/{env.name}/{split}").sample(available, n)
        seeds[split] = {"available": len(available), "played": played}
        if self.progress:
          self.progress.total -= self.cfg.episodes[split] - n
        for index, seed in enumerate(played):
          env = self._play(env, family, task, split, index, seed)
          if self.progress:
            self.progress.update()
    finally:
      _close(env)
    return seeds

  def _play(self, env: RealEnv, family: str, task: str, split: str, index: int,
            seed: int) -> RealEnv:
    """One episode; returns the adapter to go on with (a new one after a crash)."""
    policy = corpus.pick_policy(self.cfg.policy_mix,
                                f"policy/{self.cfg.seed}/{env.name}/{split}/{index}")
    start = time.perf_counter()
    try:
      ep, ep_stats = base.run_episode(env, seed, policy, noise=self.cfg.noise,
                                      max_steps=self.cfg.max_steps,
                                      episode_id=f"{env.name}/seed-{seed}/{policy}")
    except Exception as e:  # an engine crash skips this game only
      error = f"{type(e).__name__}: {e}".splitlines()[0][:_MAX_ERROR_CHARS]
      logging.warning("skipping crashed game %s split %s seed %d (%s): %s",
                      env.name, split, seed, policy, error)
      self.crashes.append({"family": family, "task": task, "split": split, "seed": seed,
                           "policy": policy, "error": error})
      self.counts[family].crashed_games += 1
      _close(env)
      return adapters.make(env.name)
    self.writers.write(split, ep)
    c = self.counts[family]
    c.episodes += 1
    c.transitions += len(ep.steps)
    c.successes += ep_stats.success
    c.failed_actions += ep_stats.failed_actions
    per_policy = self.timing[family].setdefault(policy, [0, 0.0])
    per_policy[0] += 1
    per_policy[1] += time.perf_counter() - start
    return env


def build_real_corpus(cfg: RealCorpusConfig, out_dir: str, *, verbose: bool = True) -> dict:
  """Writes the split files, the tokenizer and stats.json; returns the stats
  (plus `env_stats`, the live per-split statistics, for printing)."""
  cfg.validate()
  os.makedirs(out_dir, exist_ok=True)
  plan = cfg.tasks()
  requested = sum(map(len, plan.values())) * sum(cfg.episodes[s] for s in cfg.splits())
  progress = Progress("build_real_corpus", requested, "episodes") if verbose else None
  writers = _SplitWriters(out_dir, cfg.splits())
  player = _Player(cfg, writers, progress)
  try:
    split_info = {family: {"tasks": tasks,
                           "seeds": {task: player.play_task(family, task) for task in tasks}}
                  for family, tasks in plan.items()}
  except BaseException:
    writers.abort()
    raise
  written = writers.commit()
  if progress:
    progress.close()
  corpus.remove_stale(out_dir, written, cfg.tokenizer_vocab)
  if cfg.tokenizer_vocab and "train" not in written:
    raise RuntimeError("no train episode was written (every game crashed?): no tokenizer; "
                       f"crashes: {player.crashes[:3]}")

  tokenizer = corpus.train_split_tokenizer(out_dir, cfg.tokenizer_vocab)
  env_stats = corpus.split_stats(out_dir, written, tokenizer)
  result = {
      "config": config_dict(cfg),
      "splits": split_info,
      "counts": {family: dataclasses.asdict(c) for family, c in player.counts.items()},
      "crashes": player.crashes,
      "stats": {split: {env: s.summary(tokenizer is not None) for env, s in sorted(st.items())}
                for split, st in env_stats.items()},
      "tokenizer": ({"file": corpus.TOKENIZER_FILE, "vocab_size": tokenizer.vocab_size}
                    if tokenizer else None),
      "timing": {family: _rates(per) for family, per in player.timing.items()},
  }
  corpus.write_json(os.path.join(out_dir, "stats.json"), result)
  result["env_stats"] = env_stats
  return result


def _rates(per_policy: Mapping[str, list[float]]) -> dict:
  """Episodes per minute of one family, overall and per policy (wall clock of
  the episodes, resets and game generation included, engine start-up not)."""
  rate = lambda n, s: round(60 * n / max(s, 1e-9), 1)
  episodes = sum(n for n, _ in per_policy.values())
  seconds = sum(s for _, s in per_policy.values())
  return {"episodes": episodes, "seconds": round(seconds, 2),
          "episodes_per_min": rate(episodes, seconds),
          "by_policy": {p: {"episodes": n, "episodes_per_min": rate(n, s)}
                        for p, (n, s) in sorted(per_policy.items())}}


def format_summary(result: dict) -> str:
  """Per-split tables, counts and speed per family, crashes."""
  with_tokens = result["tokenizer"] is not None
  parts = []
  for split, per_env in result["env_stats"].items():
    parts += [f"== {split} ==", stats_lib.format_table(per_env, with_tokens), ""]
  for family, c in result["counts"].items():
    t = result["timing"][family]
    speeds = ", ".join(f"{p} {v['episodes_per_min']}" for p, v in t["by_policy"].items())
    parts.append(f"{family}: {c['episodes']} episodes, {c['transitions']} transitions, "
                 f"{c['crashed_games']} crashed games; {t['episodes_per_min']} episodes/min "
                 f"({speeds})")
  if with_tokens:
    parts.append(f"tokenizer: {result['tokenizer']['vocab_size']} pieces")
  return "\n".join(parts)
