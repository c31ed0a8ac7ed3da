"""Evaluates a world model (or a file of anyone's predictions) on a trajectory file.

Per transition: G samples are drawn (or read), and every sample is scored for
fidelity (BLEU-1, ROUGE-L, exact match against the reference next state) and
grounding (the step's `checks`, the environment's callback, trailing anchors); the
G samples together give diversity (Self-BLEU, Distinct-1/2). MAUVE compares
the set of first samples with the set of references, per environment.
Steerability re-predicts steered transitions with the steer removed;
rollout consistency replays each episode's actions open-loop in the world
model and scores step k against the recorded real next state. Every mean
comes with a 95% bootstrap interval over prompts.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import math
import os
from collections.abc import Callable, Sequence

import numpy as np

from mdlm_wm.data import schema
from mdlm_wm.data.serialize import Transition, transitions
from mdlm_wm.eval import grounding, metrics, stats
from mdlm_wm.utils.progress import Progress

PER_SAMPLE = ("bleu1", "rouge_l", "exact", "checks", "env", "well_formed", "pass", "pass_all",
              "determined_acc", "revealed_valid", "trailing", "trailing_pass")
PER_PROMPT = ("self_bleu", "distinct_1", "distinct_2")


@dataclasses.dataclass(frozen=True)
class EvalConfig:
  num_samples: int = 4
  max_examples: int = 0  # 0: every transition
  batch_size: int = 16
  seed: int = 0
  horizons: tuple[int, ...] = (1, 2, 4, 8)
  max_rollouts: int = 32  # episodes replayed for rollout consistency (0: skip)
  max_steered: int = 64  # steered transitions re-predicted without z (0: skip)


@dataclasses.dataclass(frozen=True)
class Example:
  episode: schema.Episode
  index: int  # step index in the episode
  transition: Transition

  @property
  def step(self) -> schema.Step:
    return self.episode.steps[self.index]

  @property
  def key(self) -> str:
    return f"{self.episode.id}#{self.index}"


# A predictor maps transitions (+ per-transition steer overrides) to G texts each.
Predictor = Callable[[Sequence[Transition], Sequence[str | None], int, int], list[list[str]]]


def load_examples(path: str, history_len: int, max_examples: int = 0):
  """Episodes of `path` and their transitions (schema errors name file and line).

  With `max_examples`, transitions are taken round-robin over environments
  (each environment's in file order), so a small evaluation still covers
  every environment.
  """
  episodes = list(schema.iter_episodes(path))
  examples = round_robin_by_env([Example(ep, k, tr) for ep in episodes
                                 for k, tr in enumerate(transitions(ep, history_len))])
  return episodes, examples[:max_examples] if max_examples else examples


def round_robin_by_env(items: Sequence, env: Callable = lambda ex: ex.episode.env) -> list:
  """`items` (examples, or anything `env` names an environment of)
  interleaved over environments, each environment's in order, so that any
  prefix covers every environment."""
  by_env = collections.defaultdict(list)
  for item in items:
    by_env[env(item)].append(item)
  return _round_robin(list(by_env.values()))


def _round_robin(groups: list[list]) -> list:
  out = []
  for i in range(max((len(g) for g in groups), default=0)):
    out += [g[i] for g in groups if i < len(g)]
  return out


def predict_all(predict: Predictor, trs: Sequence[Transition], steers, cfg: EvalConfig,
                label: str) -> list[list[str]]:
  out: list[list[str]] = []
  progress = Progress(label, len(trs), "transitions")
  for i in range(0, len(trs), cfg.batch_size):
    out += predict(trs[i:i + cfg.batch_size], steers[i:i + cfg.batch_size], cfg.num_samples,
                   cfg.seed + i)
    progress.update(len(trs[i:i + cfg.batch_size]))
  progress.close()
  return out


def model_predict(world, *, batch_size: int = 16, seed: int = 0, label: str = "sample",
                  **sample_overrides) -> Callable[[Sequence[Example], Sequence[str | None]],
                                                  list[str]]:
  """A world model (`WorldModel.generate`) as `predict(examples, steers)`: one
  sample per example, in batches of `batch_size`, with progress; a steer None
  keeps the spec's, "" removes it."""
  cfg = EvalConfig(num_samples=1, batch_size=batch_size, seed=seed)

  def predict(examples: Sequence[Example], steers: Sequence[str | None]) -> list[str]:
    sample = lambda trs, st, g, s: world.generate(trs, num_samples=g, seed=s, steers=list(st),
                                                  **sample_overrides)
    return [samples[0] for samples in predict_all(
        sample, [ex.transition for ex in examples], list(steers), cfg, label)]
  return predict


def score_example(ex: Example, samples: Sequence[str]) -> dict[str, float]:
  """Per-sample metrics averaged over the G samples, plus diversity over them."""
  ref = ex.step.next_state
  per = collections.defaultdict(list)
  for text in samples:
    per["bleu1"].append(metrics.bleu1(text, ref))
    per["rouge_l"].append(metrics.rouge_l(text, ref))
    per["exact"].append(metrics.exact_match(text, ref))
    for k, v in grounding.grounding_scores(ex.episode.env, ex.episode.spec, ex.step,
                                           text).items():
      per[k].append(v)
  row = {k: _nanmean(v) for k, v in per.items()}
  if len(samples) >= 2:
    row["self_bleu"] = metrics.self_bleu(samples)
  row["distinct_1"] = metrics.distinct_n(samples, 1)
  row["distinct_2"] = metrics.distinct_n(samples, 2)
  return row


def _nanmean(values) -> float:
  vals = [v for v in values if not (isinstance(v, float) and math.isnan(v))]
  return float(np.mean(vals)) if vals else float("nan")


def _summaries(rows: list[dict], keys: Sequence[str]) -> dict:
  return stats.summarize(rows, list(keys))


MAUVE_MIN_REFERENCES = 25


def mauve_by_env(examples: Sequence[Example], predictions: Sequence[Sequence[str]]) -> dict:
  """MAUVE of all samples vs the references, per environment (TF-IDF + SVD features).

  Below MAUVE_MIN_REFERENCES references the quantized distributions have so
  few buckets that the score says nothing (garbage reached 0.998 at 10
  references), so it is reported as null.
  """
  by_env = collections.defaultdict(lambda: ([], []))
  for ex, samples in zip(examples, predictions):
    by_env[ex.episode.env][0].extend(samples)
    by_env[ex.episode.env][1].append(ex.step.next_state)
  return {env: (metrics.mauve_score(preds, refs) if len(refs) >= MAUVE_MIN_REFERENCES
                else None) for env, (preds, refs) in sorted(by_env.items())}


def steerability(predict: Predictor, examples: Sequence[Example], predictions, cfg: EvalConfig):
  """Steered transitions: checks with z vs the same prompt predicted with z removed."""
  steered = [(ex, p) for ex, p in zip(examples, predictions) if ex.episode.spec.steer]
  steered = steered[:cfg.max_steered]
  if not steered or not cfg.max_steered:
    return None
  without = predict_all(predict, [ex.transition for ex, _ in steered], [""] * len(steered),
                        cfg, "steer-removed")
  score = lambda ex, texts: [grounding.grounding_scores(ex.episode.env, ex.episode.spec, ex.step,
                                                        t) for t in texts]
  with_rows = [s for (ex, p) in steered for s in score(ex, p)]
  without_rows = [s for (ex, _), p in zip(steered, without) for s in score(ex, p)]
  return {"transitions": len(steered), **grounding.steer_effect(with_rows, without_rows)}


def rollout_consistency(rollout: Callable | None, episodes: Sequence[schema.Episode],
                        cfg: EvalConfig) -> dict | None:
  """Open-loop rollouts of each episode's actions, scored against the recorded
  real next states (the environments are deterministic, so these are what the
  real environment returns for the same actions): pass rate and mean state-
  check score (the environment's callback) by horizon."""
  if rollout is None or not cfg.max_rollouts:
    return None
  longest = max(cfg.horizons)
  by_env = collections.defaultdict(list)
  for ep in episodes:
    if len(ep.steps) >= 2:
      by_env[ep.env].append(ep)
  chosen = _round_robin(list(by_env.values()))[:cfg.max_rollouts]
  rows = []
  progress = Progress("rollouts", len(chosen), "episodes")
  for i, ep in enumerate(chosen):
    actions = [s.action for s in ep.steps[:longest]]
    predicted = rollout(ep.spec, actions, cfg.seed + i)
    for k, (step, text) in enumerate(zip(ep.steps, predicted), start=1):
      if k in cfg.horizons:
        scores = grounding.grounding_scores(ep.env, ep.spec, step, text)
        rows.append((k, scores["pass"], scores.get("env", scores["checks"])))
    progress.update()
  progress.close()
  by_horizon = lambda col: {str(k): v for k, v in grounding.pass_rate_by_horizon(
      (r[0], r[col]) for r in rows).items()}
  return {"episodes": len(chosen), "pass_by_horizon": by_horizon(1),
          "score_by_horizon": by_horizon(2)}


def evaluate(examples: Sequence[Example], predictions: Sequence[Sequence[str]], *,
             episodes: Sequence[schema.Episode] = (), predict: Predictor | None = None,
             rollout: Callable | None = None, cfg: EvalConfig = EvalConfig()) -> dict:
  """The report: overall and per-environment means with 95% CIs, MAUVE,
  steerability and rollout consistency (when a model is given)."""
  rows = [score_example(ex, p) for ex, p in zip(examples, predictions)]
  keys = [k for k in PER_SAMPLE + PER_PROMPT if any(k in r for r in rows)]
  by_env = collections.defaultdict(list)
  for ex, row in zip(examples, rows):
    by_env[ex.episode.env].append(row)
  report = {
      "examples": len(rows),
      "num_samples": len(predictions[0]) if predictions else 0,
      "overall": _summaries(rows, keys),
      "per_env": {env: _summaries(r, keys) for env, r in sorted(by_env.items())},
      "mauve": mauve_by_env(examples, predictions),
      "mauve_features": "TF-IDF (fitted on the references) + truncated SVD",
  }
  if predict is not None:
    report["steerability"] = steerability(predict, examples, predictions, cfg)
  report["rollout"] = rollout_consistency(rollout, episodes, cfg)
  return report


def write_report(report: dict, path: str) -> None:
  """Writes a report as JSON atomically (a crash never leaves half a file),
  creating its directory."""
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with open(path + ".tmp", "w") as f:
    json.dump(report, f, indent=2)
  os.replace(path + ".tmp", path)


def write_predictions(path: str, examples: Sequence[Example],
                      predictions: Sequence[Sequence[str]]) -> None:
  """Writes one line per example in the format `read_predictions` reads (with
  env, action and reference for reading by eye), atomically."""
  with open(path + ".tmp", "w", encoding="utf-8") as f:
    for ex, samples in zip(examples, predictions, strict=True):
      f.write(json.dumps({"id": ex.episode.id, "env": ex.episode.env, "step": ex.index,
                          "action": ex.transition.action, "reference": ex.step.next_state,
                          "samples": list(samples)}, ensure_ascii=False) + "\n")
  os.replace(path + ".tmp", path)


def read_prediction_map(path: str) -> dict[str, list[str]]:
  """The samples of every line of a predictions file, keyed `id#step`.

  Each line: {"id": episode id, "step": index, "samples": [...]} (or
  "prediction": "..."); a malformed line is a ValueError naming file:line.
  """
  found = {}
  with open(path, encoding="utf-8") as f:
    for lineno, line in enumerate(f, start=1):
      if not line.strip():
        continue
      try:
        row = json.loads(line)
        samples = row["samples"] if "samples" in row else [row["prediction"]]
        key = f"{row['id']}#{int(row['step'])}"
      except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{path}:{lineno}: expected {{'id', 'step', 'samples' or "
                         f"'prediction'}}: {e}") from None
      if not samples or not all(isinstance(s, str) for s in samples):
        raise ValueError(f"{path}:{lineno}: samples must be a non-empty list of strings")
      found[key] = samples
  return found


def read_predictions(path: str, examples: Sequence[Example]) -> list[list[str]]:
  """Predictions written by `launch.sample` (or any system) for `examples`,
  in their order; every example must have a line (`read_prediction_map`'s
  format), or a ValueError names the first missing one."""
  found = read_prediction_map(path)
  missing = [ex.key for ex in examples if ex.key not in found]
  if missing:
    raise ValueError(f"{path}: no prediction for {len(missing)} transition(s), e.g. "
                     f"{missing[0]} (id#step)")
  return [found[ex.key] for ex in examples]
