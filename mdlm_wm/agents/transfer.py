"""The transfer study's tables (launch/transfer_study.sh writes the inputs).

A study directory holds `eval/<arm>.json` (launch.evaluate_agent reports of
each agent in the real environments), `eval/wm_<objective>.real_test.json`
(launch.evaluate reports of the world models on the real test split, and
`eval/copy.real_test.json`, the copy-s_t floor on the same transitions),
`eval/wm2real_<world model>.json` (launch.wm2real reports),
`agent_grpo_<arm>/` workdirs (their checkpoint meta gives the GRPO budget)
and `times.tsv` (stage name, wall seconds). `render(study)` returns the
Markdown: one success table (per environment and overall, mean [95% CI],
episodes and wall time of each arm), one table of the world models'
one-step state checks and one of Word2World's protocol per world model.
Missing inputs are left out and listed, so a partial study renders.
"""

from __future__ import annotations

import json
import os

from mdlm_wm.train import checkpoint

ARMS = (
    ("random", "random actions (baseline)"),
    ("bc", "(a) behaviour cloning only"),
    ("grpo_ar", "(b) BC + GRPO in the AR world model"),
    ("grpo_mdlm", "(c) BC + GRPO in the MDLM world model"),
    ("grpo_mdlm_long", "(c') BC + GRPO in the MDLM world model trained {ratio} longer"),
    ("grpo_real", "(d) BC + GRPO in the real environment"),
    ("expert", "expert (the environment's own policy)"),
)
# Labels with {ratio} name how much longer the extra MDLM trained (from the checkpoints).
WORLD_MODELS = (("wm_ar", "AR"), ("wm_mdlm", "MDLM"), ("wm_mdlm_long", "MDLM, {ratio} steps"))
# The floor every one-step number is read against (launch.evaluate --baseline=copy).
FLOOR = ("copy", "copy s_t (floor)")
# The study's optional extra arm (MDLM_LONG_STEPS=0 skips it): not "missing".
OPTIONAL = ("grpo_mdlm_long", "wm_mdlm_long")
WM_METRICS = (("pass", "pass rate"), ("checks", "check score"),
              ("bleu1", "BLEU-1"), ("rouge_l", "ROUGE-L"))


def _cell(summary: dict | None, digits: int = 2) -> str:
  """mean [low, high]; "-" when missing or over no episodes (WM2Real when the
  world model granted no win: its mean is NaN)."""
  if not summary or summary.get("n") == 0:
    return "-"
  return f"{summary['mean']:.{digits}f} [{summary['low']:.{digits}f}, {summary['high']:.{digits}f}]"


def _minutes(seconds: float | None) -> str:
  return "-" if seconds is None else f"{seconds / 60:.1f} min"


def read_times(study: str) -> dict[str, float]:
  """Stage -> wall seconds (the last entry of a stage wins: a rerun replaces)."""
  path = os.path.join(study, "times.tsv")
  times: dict[str, float] = {}
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      for line in f:
        name, _, seconds = line.strip().partition("\t")
        if name and seconds:
          times[name] = float(seconds)
  return times


def _latest_meta(workdir: str) -> tuple[int, dict] | None:
  """(step, meta) of the latest checkpoint in `workdir`, or None."""
  return checkpoint.latest_meta(os.path.join(workdir, "checkpoints"))


def grpo_budget(study: str, arm: str) -> int | None:
  """Training episodes of a GRPO arm: steps x B x G of its latest checkpoint."""
  latest = _latest_meta(os.path.join(study, f"agent_{arm}"))
  if latest is None:
    return None
  step, meta = latest
  g = meta["grpo"]["grpo"]
  return step * g["num_tasks"] * g["num_episodes"]


def long_ratio(study: str) -> str:
  """How much longer the extra MDLM trained than the MDLM ("3x"), from their
  checkpoints; "more" when either is missing."""
  latest = [_latest_meta(os.path.join(study, name)) for name in ("wm_mdlm_long", "wm_mdlm")]
  if None in latest:
    return "more"
  return f"{latest[0][0] / latest[1][0]:g}x"


def _load(path: str) -> dict | None:
  if not os.path.exists(path):
    return None
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def render(study: str) -> str:
  times = read_times(study)
  ratio = long_ratio(study)
  missing: list[str] = []
  reports = {}
  for arm, _ in ARMS:
    reports[arm] = _load(os.path.join(study, "eval", f"{arm}.json"))
    if reports[arm] is None and arm not in OPTIONAL:
      missing.append(f"eval/{arm}.json")
  envs = list(dict.fromkeys(name for rep in reports.values() if rep
                            for name in rep["per_task"]))
  head = (["agent"] + [f"success: {e}" for e in envs]
          + ["success: overall", "steps", "training episodes", "training wall time",
             "eval episodes", "eval wall time"])
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for arm, label in ARMS:
    rep = reports[arm]
    if rep is None:
      continue
    train_episodes = grpo_budget(study, arm) if arm.startswith("grpo") else None
    train_time = times.get(arm) if arm not in ("random", "expert") else None
    row = ([label.format(ratio=ratio)] + [_cell(rep["per_task"].get(e, {}).get("success"))
                                          for e in envs]
           + [_cell(rep["overall"]["success"]), f"{rep['overall']['steps']['mean']:.1f}",
              "-" if train_episodes is None else f"{train_episodes:,}",
              _minutes(train_time), str(rep["overall"]["success"]["n"]),
              _minutes(times.get(f"eval_{arm}", rep.get("seconds")))])
    lines.append("| " + " | ".join(row) + " |")
  out = ["## Agents in the real environments (test games)", "", *lines, ""]

  wm = {name: _load(os.path.join(study, "eval", f"{name}.real_test.json"))
        for name, _ in (*WORLD_MODELS, FLOOR)}
  missing += [f"eval/{name}.real_test.json" for name, rep in wm.items()
              if rep is None and name not in OPTIONAL]
  present = [(name, label) for name, label in (*WORLD_MODELS, FLOOR) if wm[name]]
  if present:
    wm_envs = list(dict.fromkeys(e for name, _ in present for e in wm[name]["per_env"]))
    head = ["world model", "scope"] + [label for _, label in WM_METRICS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, label in present:
      for scope, summary in [("all", wm[name]["overall"])] + [
          (e, wm[name]["per_env"][e]) for e in wm_envs if e in wm[name]["per_env"]]:
        lines.append("| " + " | ".join([label.format(ratio=ratio), scope] + [
            _cell(summary.get(k), 3) for k, _ in WM_METRICS]) + " |")
    out += ["## World models, one step on the real test split", "", *lines, ""]
  out += _wm2real_table(study, ratio, missing)
  if missing:
    out += ["Missing: " + ", ".join(missing), ""]
  return "\n".join(out)


def _wm2real_table(study: str, ratio: str, missing: list[str]) -> list[str]:
  """Word2World's protocol per world model (mdlm_wm/agents/wm2real.py), overall."""
  head = ["world model", "WM task success", "WM2Real", "replay success",
          "single-step pass", "copy s_t pass", "episodes", "wall time"]
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  times = read_times(study)
  for name, label in WORLD_MODELS:
    rep = _load(os.path.join(study, "eval", f"wm2real_{name}.json"))
    if rep is None:
      if name not in OPTIONAL:
        missing.append(f"eval/wm2real_{name}.json")
      continue
    o, single = rep["overall"], rep["single_step"] or {}
    cells = [_cell(o["wm_success"]), f"{_cell(o['wm2real'])} (n {o['wm2real']['n']})",
             _cell(o["replay_success"]),
             _cell(single.get("model", {}).get("pass"), 3),
             _cell(single.get("copy", {}).get("pass"), 3),
             str(o["wm_success"]["n"]),
             _minutes(times.get(f"wm2real_{name}", sum(rep["seconds"].values())))]
    lines.append("| " + " | ".join([label.format(ratio=ratio)] + cells) + " |")
  if len(lines) == 2:
    return []
  return ["## Word2World's protocol: the BC agent inside each world model", "", *lines, ""]
