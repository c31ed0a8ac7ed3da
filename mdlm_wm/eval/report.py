"""Side-by-side Markdown table and plots from several `launch.evaluate` reports."""

from __future__ import annotations

import collections
import os
from collections.abc import Sequence

TABLE_KEYS = ("bleu1", "rouge_l", "exact", "checks", "env", "pass", "pass_all", "determined_acc",
              "revealed_valid", "trailing_pass", "self_bleu", "distinct_2")


def label(report: dict, name: str) -> str:
  src = report.get("source", {})
  if "objective" in src:
    return f"{name} ({src['objective']}, {src['params'] / 1e6:.2f}M)"
  if "baseline" in src:
    return f"{name} (baseline: {src['baseline']})"
  return name


def _cell(summary: dict | None) -> str:
  if not summary or summary.get("n", 0) == 0:
    return "-"
  return f"{summary['mean']:.3f} [{summary['low']:.3f}, {summary['high']:.3f}]"


def markdown_table(reports: Sequence[dict], names: Sequence[str]) -> str:
  """Rows: metrics (overall, then per environment for `pass`); columns: reports."""
  head = "| metric | " + " | ".join(label(r, n) for r, n in zip(reports, names)) + " |"
  lines = [head, "|---|" + "---|" * len(reports)]
  for key in TABLE_KEYS:
    lines.append(f"| {key} | " + " | ".join(_cell(r["overall"].get(key)) for r in reports) + " |")
  envs = sorted({e for r in reports for e in r.get("per_env", {})})
  for env in envs:
    cells = [_cell(r.get("per_env", {}).get(env, {}).get("pass")) for r in reports]
    lines.append(f"| pass: {env} | " + " | ".join(cells) + " |")
  for env in sorted({e for r in reports for e in r.get("mauve", {})}):
    cells = [f"{r['mauve'][env]:.3f}" if r.get("mauve", {}).get(env) is not None else "-"
             for r in reports]
    lines.append(f"| MAUVE: {env} | " + " | ".join(cells) + " |")
  lines += _extra_rows(reports)
  lines.append("")
  lines.append("Means with 95% bootstrap intervals over prompts; MAUVE features: TF-IDF fitted "
               "on the references + truncated SVD.")
  return "\n".join(lines)


def _extra_rows(reports: Sequence[dict]) -> list[str]:
  """Steerability, rollout consistency by horizon and sampling time, where present."""
  fmt = lambda v: "-" if v is None else f"{v:.3f}"
  rows = []
  if any(r.get("steerability") for r in reports):
    for key, name in (("with", "steered checks, with z"), ("without", "steered checks, z removed"),
                      ("delta", "steer effect (with - without)")):
      rows.append(f"| {name} | " + " | ".join(
          fmt((r.get("steerability") or {}).get(key)) for r in reports) + " |")
  horizons = sorted({h for r in reports for h in (r.get("rollout") or {}).get(
      "score_by_horizon", {})}, key=int)
  for h in horizons:
    rows.append(f"| rollout score @ {h} steps | " + " | ".join(
        fmt((r.get("rollout") or {}).get("score_by_horizon", {}).get(h)) for r in reports) + " |")
  if any("seconds_per_transition" in r.get("source", {}) for r in reports):
    rows.append("| s / transition (G samples, incl. compile) | " + " | ".join(
        fmt(r.get("source", {}).get("seconds_per_transition")) for r in reports) + " |")
  return rows


def plot_all(reports: Sequence[dict], names: Sequence[str], out_dir: str) -> list[str]:
  """Writes the PNGs that the reports support; returns their paths."""
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  written = []

  def save(fig, name):
    path = os.path.join(out_dir, name)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    written.append(path)

  sized = [(r, n) for r, n in zip(reports, names) if "params" in r.get("source", {})]
  if sized:
    fig, ax = plt.subplots(figsize=(6, 4))
    by_obj = collections.defaultdict(list)
    for r, _ in sized:
      by_obj[r["source"]["objective"]].append(r)
    for obj, rs in sorted(by_obj.items()):
      rs.sort(key=lambda r: r["source"]["params"])
      x = [r["source"]["params"] / 1e6 for r in rs]
      p = [r["overall"]["pass"] for r in rs]
      ax.errorbar(x, [s["mean"] for s in p], yerr=[[s["mean"] - s["low"] for s in p],
                                                   [s["high"] - s["mean"] for s in p]],
                  marker="o", capsize=3, label=obj)
    ax.set_xscale("log")
    ax.set(xlabel="parameters (M)", ylabel="state-check pass rate", title="Pass rate by size")
    ax.legend()
    save(fig, "pass_by_size.png")

  rolled = [(r, n) for r, n in zip(reports, names) if r.get("rollout")]
  if rolled:
    fig, ax = plt.subplots(figsize=(6, 4))
    for r, n in rolled:
      for key, style in (("score_by_horizon", "-"), ("pass_by_horizon", ":")):
        h = r["rollout"][key]
        ks = sorted(h, key=int)
        ax.plot([int(k) for k in ks], [h[k] for k in ks], style, marker="o",
                label=f"{label(r, n)} {key.split('_')[0]}")
    ax.set(xlabel="rollout horizon (steps)", ylabel="state-check score / pass rate",
           title="Open-loop rollouts")
    ax.legend()
    save(fig, "pass_by_horizon.png")

  stepped = [r for r in reports if r.get("source", {}).get("objective") == "mdlm"
             and "seconds_per_transition" in r["source"]]
  if len({r["source"]["sample"]["steps"] for r in stepped}) >= 2:
    stepped.sort(key=lambda r: r["source"]["sample"]["steps"])
    steps = [r["source"]["sample"]["steps"] for r in stepped]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(steps, [r["overall"]["bleu1"]["mean"] for r in stepped], marker="o", label="BLEU-1")
    ax.plot(steps, [r["overall"]["pass"]["mean"] for r in stepped], marker="s", label="pass")
    ax.set(xlabel="denoising steps", ylabel="score", title="Quality and latency vs steps")
    ax.set_xscale("log", base=2)
    twin = ax.twinx()
    twin.plot(steps, [r["source"]["seconds_per_transition"] * 1e3 for r in stepped], "k--",
              marker="^", label="latency")
    twin.set_ylabel("ms per transition (incl. compile)")
    ax.legend(loc="upper left")
    save(fig, "quality_latency_vs_steps.png")
  return written
