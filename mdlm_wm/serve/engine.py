"""The model side of the service: checks that need the model, batched steps, rollouts.

Seeding: every step request has a seed (its own, or one the server draws and
returns), and its samples depend on that seed alone, not on which requests
share its sampler call: calls pass one seed per transition
(`WorldModel.generate(seed=[...])`, where transition b draws all its noise
from its own key). A request with seed s therefore returns exactly
`wm.generate([transition], seed=[s], ...)[0]`, batched or not, and seeds
never split batches. (Batch-mates can differ in padding, which is masked;
measured identical on the tiny models, though XLA does not promise bitwise
equality across batch shapes.) Rollouts run `WorldModel.rollout` as is.

Calls pad the batch up to a power of two (repeating the first transition and
dropping its extra outputs), so a stream of batch sizes compiles the sampler
for a handful of shapes, not for every size up to `max_batch`.

A request that names its environment (`env`) gets states that parse as that
environment's: each one its parser rejects is drawn again, up to the model's
`sample.format_retries` times (WorldModel.redraw, seeded from the request's
seed, so batching still changes nothing).
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Sequence
from typing import Any

from mdlm_wm.data.schema import Spec
from mdlm_wm.data.serialize import Transition
from mdlm_wm.serve.protocol import MAX_SEED, RequestError, Sampling
from mdlm_wm.envs.score import format_check
from mdlm_wm.world_model import Anchors, WorldModel, padded_to_power_of_two


@dataclasses.dataclass(frozen=True)
class BatchKey:
  """Requests with equal keys share a sampler call."""
  num_samples: int
  temperature: float
  steps: int | None  # None for AR models


@dataclasses.dataclass(frozen=True)
class StepJob:
  transition: Transition
  steer: str | None
  fixed: Anchors | None
  seed: int
  env: str | None = None  # its parser redraws states that do not parse


@dataclasses.dataclass(frozen=True)
class StepResult:
  next_states: list[str]
  batch_size: int  # requests served by the same sampler call


class Engine:
  """A WorldModel behind the batcher. `run_steps` and `rollout` block: call
  them on the model's worker thread."""

  def __init__(self, wm: WorldModel):
    self.wm = wm

  # ------------------------------------------------------------------ checks

  def check(self, sampling: Sampling, fixed: Anchors | None = None,
            state: str | None = None) -> None:
    """Raises RequestError (422) for settings or anchors this model cannot serve
    (anchors as pinned after `state`, the s_t a delta model writes against)."""
    errors = []
    if sampling.steps is not None:
      if self.wm.objective != "mdlm":
        errors.append(f"steps: only MDLM models take sampler steps; this model is "
                      f"{self.wm.objective}")
      else:
        try:
          self.wm.decode_config(steps=sampling.steps)
        except ValueError as e:
          errors.append(f"steps: {e}")
    if fixed is not None:
      try:
        self.wm.fixed_canvas([fixed], None if state is None else [state])
      except ValueError as e:
        errors.append(f"fixed: {e}")
    if errors:
      raise RequestError(422, errors)

  # ------------------------------------------------------------------ batching

  def batch_key(self, sampling: Sampling) -> BatchKey:
    """Defaults resolved, so a request that leaves a setting out batches with
    one that names the default."""
    defaults = self.wm.cfg.sample
    temperature = defaults.temperature if sampling.temperature is None else sampling.temperature
    steps = None
    if self.wm.objective == "mdlm":
      steps = defaults.steps if sampling.steps is None else sampling.steps
    return BatchKey(sampling.num_samples, float(temperature), steps)

  def run_steps(self, key: BatchKey, jobs: Sequence[StepJob]) -> list[StepResult]:
    """One sampler call for `jobs` (the batcher's `run`)."""
    n = len(jobs)
    padded = padded_to_power_of_two(list(jobs))
    texts = self.wm.generate([j.transition for j in padded], num_samples=key.num_samples,
                             seed=[j.seed for j in padded], steers=[j.steer for j in padded],
                             anchors=[j.fixed for j in padded],
                             accept=[format_check(j.env, j.transition.spec) for j in padded],
                             **self._overrides(key))
    return [StepResult(t, n) for t in texts[:n]]

  def rollout(self, spec: Spec, actions: Sequence[str], state: str | None, steer: str | None,
              sampling: Sampling, seed: int, env: str | None = None) -> list[list[str]]:
    """WorldModel.rollout with the request's settings."""
    return self.wm.rollout(spec, actions, state=state, steer=steer,
                           num_samples=sampling.num_samples, seed=seed,
                           accept=format_check(env, spec),
                           **self._overrides(self.batch_key(sampling)))

  def _overrides(self, key: BatchKey) -> dict[str, Any]:
    out: dict[str, Any] = {"temperature": key.temperature}
    if key.steps is not None:
      out["steps"] = key.steps
    return out

  # ------------------------------------------------------------------ info

  def info(self) -> dict[str, Any]:
    wm, cfg = self.wm, self.wm.cfg
    defaults = {"num_samples": 1, "temperature": cfg.sample.temperature, "top_p": cfg.sample.top_p}
    if wm.objective == "mdlm":
      defaults.update(steps=cfg.sample.steps, confidence=cfg.sample.confidence,
                      block_size=cfg.sample.block_size, cfg_scale=cfg.sample.cfg_scale,
                      schedule=cfg.diffusion.schedule)
    return {"objective": wm.objective, "params": wm.num_params,
            "vocab_size": wm.tokenizer.vocab_size, "canvas_len": wm.canvas_len,
            "context_len": cfg.data.max_context_len, "history_len": cfg.data.history_len,
            "sampler_defaults": defaults}


def seed_of(sampling: Sampling) -> int:
  """The request's seed, or a fresh one."""
  return sampling.seed if sampling.seed is not None else secrets.randbelow(MAX_SEED + 1)
