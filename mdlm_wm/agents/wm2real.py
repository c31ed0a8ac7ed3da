"""Word2World's world-to-real protocol (X1AOX1A/Word2World), with 95% intervals.

An agent plays inside a world model from the real game's own start, and what
it does there is checked in the real game:

  wm_success      per episode: the agent acts inside the world model from the
                  real reset (spec and first observation); success when the
                  world model's own state says the task is solved (the
                  environment's `success.default_success_fn`, or yours).
  wm2real         over the episodes that succeeded inside the world model:
                  their action sequence replayed open loop in the real game
                  from the same seed also succeeds there (n = those episodes).
  replay_success  over all episodes: the same replay, whether or not the world
                  model said solved (how often a plan made in the world model
                  is a real win at all).
  single_step     the world model's one-step accuracy on the real split: the
                  expert's episodes on the same seeds, every transition
                  predicted once and scored by the environment's checks
                  (`pass`, the determined facts: the number Word2World
                  reports), beside the copy-s_t floor on the same transitions.

A real success is the environment's own (`info["success"]`, else a positive
final reward, when it says done), as in `agents.evaluate`. Replays and expert
episodes run one game at a time in one engine per environment; an engine that
raises ends that game only, which is listed with its error and left out of
the means.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from absl import logging

from mdlm_wm.agents import success as success_lib
from mdlm_wm.agents.base import Agent
from mdlm_wm.agents.episodes import (EnvPool, Episode, WorldModelSimulator, agent_act,
                                     derive_seed, run_episodes)
from mdlm_wm.agents.success import SuccessFn
from mdlm_wm.data.serialize import transitions
from mdlm_wm.envs.base import run_episode
from mdlm_wm.eval import baselines, stats
from mdlm_wm.eval import evaluate as ev
from mdlm_wm.utils.progress import Progress
from mdlm_wm.world_model import WorldModel

# The single-step metrics a report keeps (of evaluate's per-sample ones).
SINGLE_STEP = ("pass", "pass_all", "determined_acc", "env")


def play_in_world_model(agent: Agent, world: WorldModel, tasks: Sequence[tuple[str, int]], *,
                        pool: EnvPool, max_steps: int | None = None, batch_size: int = 16,
                        seed: int = 0,
                        success_of: Callable[[str], SuccessFn] = success_lib.default_success_fn,
                        **sample_overrides) -> list[Episode]:
  """One episode per (env name, seed) of `tasks`, started from the real
  reset and stepped by `world`; batches of `batch_size` advance together."""
  simulator = WorldModelSimulator(world, success_of, **sample_overrides)
  progress = Progress("in the world model", total=len(tasks), unit="episodes")
  out: list[Episode] = []
  for first in range(0, len(tasks), batch_size):
    episodes = pool.start(tasks[first:first + batch_size], live=False, max_steps=max_steps)
    run_episodes(episodes, agent_act(agent, derive_seed(seed, first)), simulator,
                 seed=derive_seed(seed, first))
    out += episodes
    progress.update(len(episodes))
  progress.close()
  return out


def replay(pool: EnvPool, name: str, seed: int, actions: Sequence[str]) -> bool:
  """Whether `actions`, played open loop in real game (`name`, `seed`), win it.

  Play stops when the game says done; a sequence that ends before that is
  not a win (the game never said so)."""
  env = pool.get(name)
  env.reset(seed)
  for action in actions:
    res = env.step(action)
    if res.done:
      return bool(res.info.get("success", res.reward > 0))
  return False


def expert_examples(pool: EnvPool, tasks: Sequence[tuple[str, int]], history_len: int, *,
                    max_steps: int | None = None) -> list[ev.Example]:
  """Every transition of the expert's episode on each task, checks included
  (games whose engine raises are logged and skipped)."""
  out: list[ev.Example] = []
  for name, seed in tasks:
    try:
      episode, _ = run_episode(pool.get(name), seed, "expert", max_steps=max_steps)
    except Exception as e:  # pylint: disable=broad-except
      logging.warning("%s seed %d: the expert's episode raised %r; skipped", name, seed, e)
      continue
    out += [ev.Example(episode, k, tr)
            for k, tr in enumerate(transitions(episode, history_len))]
  return out


def single_step(world: WorldModel, examples: Sequence[ev.Example], *, seed: int = 0,
                batch_size: int = 16, **sample_overrides) -> dict:
  """One prediction per transition, scored as `launch.evaluate` scores it,
  beside the copy-s_t floor on the same transitions."""
  predictions = ev.model_predict(world, batch_size=batch_size, seed=seed, label="single step",
                                 **sample_overrides)(examples, [None] * len(examples))
  copy = baselines.copy_predictions([(ex.episode, ex.index) for ex in examples])
  # Per-example scores summarized as launch.evaluate's `overall` (no MAUVE or
  # diversity: one sample per transition, and only these metrics are kept).
  def summary(preds: Sequence[str]) -> dict:
    rows = [ev.score_example(ex, [p]) for ex, p in zip(examples, preds, strict=True)]
    return stats.summarize(rows, [k for k in SINGLE_STEP if any(k in r for r in rows)])
  return {"transitions": len(examples), "model": summary(predictions), "copy": summary(copy)}


def wm2real(agent: Agent, world: WorldModel, tasks: Sequence[tuple[str, int]], *,
            max_steps: int | None = None, batch_size: int = 16, seed: int = 0,
            single_step_examples: int = -1, pool: EnvPool | None = None,
            success_of: Callable[[str], SuccessFn] = success_lib.default_success_fn,
            **sample_overrides) -> dict:
  """The report of the protocol (module docstring) on `tasks`.

  `single_step_examples`: transitions scored for single-step accuracy (-1:
  every transition of the expert's episodes; 0: skip). `pool` lends the real
  engines (kept open for the caller); by default one is made and closed.
  """
  own_pool = pool is None
  pool = pool or EnvPool()
  seconds = {}
  try:
    t0 = time.perf_counter()
    episodes = play_in_world_model(agent, world, tasks, pool=pool, max_steps=max_steps,
                                   batch_size=batch_size, seed=seed, success_of=success_of,
                                   **sample_overrides)
    t1 = time.perf_counter()
    rows = [_replayed(pool, ep) for ep in episodes]
    t2 = time.perf_counter()
    single = None
    if single_step_examples:
      examples = expert_examples(pool, tasks, world.cfg.data.history_len, max_steps=max_steps)
      if single_step_examples > 0:
        examples = ev.round_robin_by_env(examples)[:single_step_examples]
      single = single_step(world, examples, seed=seed, batch_size=batch_size,
                           **sample_overrides) if examples else None
    seconds = {"world_model": t1 - t0, "replay": t2 - t1,
               "single_step": time.perf_counter() - t2}
  finally:
    if own_pool:
      pool.close()
  return report(rows, single, seconds)


def _replayed(pool: EnvPool, ep: Episode) -> dict:
  """The row of one world-model episode, with its replay in the real game."""
  row = {"env": ep.task, "seed": ep.seed, "wm_success": float(ep.success),
         "steps": float(ep.steps), "actions": [a for _, a in ep.history], "error": ep.error}
  if ep.error and ep.error.startswith("env"):
    return row  # no real reset (or no world model step) to replay
  try:
    row["real_success"] = float(replay(pool, ep.task, ep.seed, row["actions"]))
  except Exception as e:  # pylint: disable=broad-except
    logging.warning("%s seed %d: the replay raised %r", ep.task, ep.seed, e)
    row["error"] = f"env: replay {e!r}"
  return row


def report(rows: Sequence[dict], single: dict | None, seconds: dict[str, float]) -> dict:
  """Means with 95% intervals, overall and per environment (see the module docstring)."""
  counted = [r for r in rows if not (r["error"] or "").startswith("env")]

  def block(subset: Sequence[dict]) -> dict:
    won = [r for r in subset if r["wm_success"]]
    return {"wm_success": stats.summarize(subset, ["wm_success"])["wm_success"],
            "wm2real": stats.summarize(won, ["real_success"])["real_success"],
            "replay_success": stats.summarize(subset, ["real_success"])["real_success"],
            "steps": stats.summarize(subset, ["steps"])["steps"]}

  names = list(dict.fromkeys(r["env"] for r in rows))
  return {
      "overall": block(counted),
      "per_env": {name: block([r for r in counted if r["env"] == name]) for name in names},
      "single_step": single,
      "errors": {source: sum((r["error"] or "").startswith(source) for r in rows)
                 for source in ("env", "agent")},
      "episodes": list(rows),
      "seconds": seconds,
  }


def format_report(rep: dict) -> str:
  """Plain-text lines: mean [95% CI] (n) per metric, overall and per environment."""
  cell = lambda s: (f"{s['mean']:.3f} [{s['low']:.3f}, {s['high']:.3f}] (n {s['n']})" if s['n']
                    else "- (n 0: no win inside the world model)")
  lines = []
  for name, block in [("overall", rep["overall"]), *rep["per_env"].items()]:
    lines.append(f"{name}: " + " | ".join(
        f"{k} {cell(block[k])}" for k in ("wm_success", "wm2real", "replay_success")))
  single = rep["single_step"]
  if single:
    for source in ("model", "copy"):
      lines.append(f"single step, {'copy s_t' if source == 'copy' else 'world model'} "
                   f"({single['transitions']} transitions): " + " | ".join(
                       f"{k} {cell(v)}" for k, v in single[source].items()))
  lines.append(f"errors: {rep['errors']} | seconds: " + ", ".join(
      f"{k} {v:.0f}" for k, v in rep["seconds"].items()))
  return "\n".join(lines)
