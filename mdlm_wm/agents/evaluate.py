"""An agent in the real environment: success rate, score and steps with 95% CIs.

`evaluate(agent, tasks)` plays one episode per (environment, seed), in
batches of episodes that advance together (one batched agent call per time
step), and reports means with percentile-bootstrap intervals
(eval/stats.py), overall and per environment.

Failures are counted, never fatal. An environment that raises (reset or
step) ends its episode, which is listed with its error but left out of the
means: it says nothing about the agent. An agent that raises on a turn ends
that episode as a failure, which the means include.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from mdlm_wm.agents.base import Agent
from mdlm_wm.agents.episodes import EnvPool, RealSimulator, agent_act, derive_seed, run_episodes
from mdlm_wm.eval import stats
from mdlm_wm.utils.progress import Progress

METRICS = ("success", "score", "steps")


def evaluate(agent: Agent, tasks: Sequence[tuple[str, int]], *, max_steps: int | None = None,
             batch_size: int = 16, seed: int = 0, pool: EnvPool | None = None,
             label: str = "episodes") -> dict:
  """Plays the (env name, seed) `tasks` with `agent`; returns the report.

  `max_steps` None: each environment's own limit. `pool` lends live
  environments (kept open for the caller); by default one is made and closed.
  """
  own_pool = pool is None
  pool = pool or EnvPool()
  progress = Progress(label, total=len(tasks), unit="episodes")
  rows = []
  t0 = time.perf_counter()
  try:
    for first in range(0, len(tasks), batch_size):
      episodes = pool.start(tasks[first:first + batch_size], live=True, max_steps=max_steps)
      run_episodes(episodes, agent_act(agent, derive_seed(seed, first)), RealSimulator(),
                   seed=derive_seed(seed, first))
      rows += [{"env": ep.task, "seed": ep.seed, "success": float(ep.success),
                "score": ep.score, "steps": float(ep.steps), "error": ep.error}
               for ep in episodes]
      progress.update(len(episodes))
  finally:
    if own_pool:
      pool.close()
  progress.close()
  seconds = time.perf_counter() - t0
  return report(rows, seconds)


def report(rows: Sequence[dict], seconds: float) -> dict:
  """The evaluation report of per-episode `rows` (see `evaluate`)."""
  counted = [r for r in rows if not (r["error"] or "").startswith("env")]
  names = list(dict.fromkeys(r["env"] for r in rows))
  return {
      "overall": stats.summarize(counted, METRICS),
      "per_task": {name: stats.summarize([r for r in counted if r["env"] == name], METRICS)
                   for name in names},
      "errors": {source: sum((r["error"] or "").startswith(source) for r in rows)
                 for source in ("env", "agent")},
      "episodes": list(rows),
      "seconds": seconds,
      "episodes_per_min": 60.0 * len(rows) / max(seconds, 1e-9),
  }


def format_report(rep: dict) -> str:
  """A plain-text table: overall and per environment, mean [95% CI]."""
  def cells(summary: dict) -> str:
    return " | ".join(f"{k} {v['mean']:.3f} [{v['low']:.3f}, {v['high']:.3f}]"
                      for k, v in summary.items()) + f" | n {summary['success']['n']}"
  lines = [f"overall: {cells(rep['overall'])}"]
  lines += [f"{name}: {cells(summary)}" for name, summary in rep["per_task"].items()]
  lines.append(f"errors: {rep['errors']} | {rep['episodes_per_min']:.1f} episodes/min")
  return "\n".join(lines)
