"""Agent GRPO: improve a behaviour-cloned agent by acting inside a world model.

One step, in the order it runs:
  1. draw B tasks (environment, seed) of `config.tasks.split`, a pure
     function of (seed, step), so a resumed run draws what the uninterrupted
     run would have;
  2. start G episodes per task from the REAL environment's reset (its spec
     and first observation): only the start is real;
  3. play the B x G episodes for up to H steps; each time step is one batched
     agent call (one action sampled per running episode, with the params
     being trained) and one batched world-model call (one next state per
     episode). An episode ends when `success_fn(spec, state)` says the task
     is solved (agents/success.py has the defaults) or at H. With
     `env_backend=real`, live environments produce the next states and judge
     success instead: the upper-bound arm of the transfer experiment, with
     the same budget of episodes;
  4. reward each episode (`config.reward`: success, optional progress shaping
     and step cost) and turn the rewards into advantages relative to the G
     episodes of its task;
  5. every action taken is a completion carrying its episode's advantage: AR
     log-probs under the sampling params and the frozen BC agent, then `mu`
     clipped policy-gradient updates with the KL penalty (rl/loop.py, shared
     with world-model GRPO).

The workdir is an agent workdir: `load_agent(workdir)` and
`launch.evaluate_agent --agent=WORKDIR` read it. With
`config.train.eval_episodes`, the agent is also evaluated in the real
environment (same sampling temperature) at step 0, every `train.eval_every`
steps and at the end
(WORKDIR/eval/real.step<N>.json, `eval/success` etc. in metrics.jsonl).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import time
from collections.abc import Sequence

import jax
import ml_collections
import numpy as np

from mdlm_wm import config as config_lib
from mdlm_wm.agents import evaluate as evaluate_lib
from mdlm_wm.agents import success as success_lib
from mdlm_wm.agents import tasks as tasks_lib
from mdlm_wm.agents.episodes import (Episode, EnvPool, RealSimulator, WorldModelSimulator,
                                     derive_seed, run_episodes)
from mdlm_wm.agents.policy import PolicyAgent, load_agent
from mdlm_wm.model import sharding
from mdlm_wm.rl import grpo, loop
from mdlm_wm.train import trainer
from mdlm_wm.world_model import WorldModel

EVAL_DIR = "eval"
PROGRESS_KEYS = ("success_rate", "reward_mean", "kl", "episodes_per_sec")


@dataclasses.dataclass
class AgentGRPOResult:
  step: int
  metrics: dict
  evals: dict  # the last real-environment evaluation: {"step": s, "success": ...}
  preempted: bool = False
  steps_run: int = 0  # 0: the workdir was already at config.train.steps

  def summary(self) -> str:
    """The launcher's last line (each evaluation printed its own as it ran)."""
    if not self.steps_run:
      return trainer.nothing_to_train(self.step)
    m = self.metrics
    return (f"done: step {self.step}, success rate {m['success_rate']:.3f}, "
            f"reward {m['reward_mean']:.3f}")


def episode_reward(ep: Episode, weights, horizon: int) -> float:
  """success * [solved] + progress * (the last state's a/b) - step_cost * steps / H."""
  reward = weights.success * float(ep.success)
  if weights.progress:
    reward += weights.progress * success_lib.progress(ep.observation)
  return reward - weights.step_cost * ep.steps / horizon


class ActionRecorder:
  """The agent's `Act` during GRPO rollouts: samples with the given params and
  keeps every action's context and tokens, by episode, for the update."""

  def __init__(self, agent: PolicyAgent, params, seed: int):
    self.agent, self.params, self.seed = agent, params, seed
    self._rows: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = (
        collections.defaultdict(list))

  def __call__(self, live: Sequence[Episode], t: int) -> list[str]:
    samples, texts = self.agent.sample([ep.turn() for ep in live],
                                       seed=derive_seed(self.seed, t), params=self.params)
    for i, ep in enumerate(live):
      self._rows[id(ep)].append((samples.context_BC[i], samples.valid_BC[i],
                                 samples.tokens_BGT[i, 0]))
    return [actions[0] for actions in texts]

  def batch(self, episodes: Sequence[Episode], advantages: Sequence[float], *,
            eot_id: int, multiple: int) -> dict[str, np.ndarray]:
    """The host update batch: one row per action of `episodes`, in order, with
    its episode's advantage; contexts left-padded to the widest. Rows are
    padded up to a multiple of `multiple` (copies with an empty mask), so a
    run compiles the update for at most H batch sizes."""
    records = [(record, adv) for ep, adv in zip(episodes, advantages)
               for record in self._rows[id(ep)]]
    if not records:
      raise RuntimeError("no episode took an action this step (see the logged errors)")
    n = len(records)
    N = -(-n // multiple) * multiple
    C = max(context.shape[0] for (context, _, _), _ in records)
    T = records[0][0][2].shape[0]
    host = {"context": np.zeros((N, C), np.int32), "valid": np.zeros((N, C), bool),
            "completion": np.zeros((N, T), np.int32), "advantages": np.zeros(N, np.float32)}
    for i in range(N):
      (context, valid, tokens), adv = records[min(i, n - 1)]
      host["context"][i, C - len(context):] = context
      host["valid"][i, C - len(valid):] = valid
      host["completion"][i] = tokens
      host["advantages"][i] = adv if i < n else 0.0
    host["mask"] = loop.completion_mask(host["completion"], eot_id)
    host["mask"][n:] = False
    return host


def run(cfg: ml_collections.ConfigDict, workdir: str, *, max_steps: int | None = None,
        success_fn: success_lib.SuccessFn | None = None) -> AgentGRPOResult:
  """Runs (or resumes) agent GRPO from the BC agent `cfg.agent`.

  `success_fn(spec, state) -> bool` replaces every environment's default
  predicate (world-model backend only: the real backend asks the
  environment); `max_steps` stops after that many steps of this call.
  """
  devices = jax.devices()[:cfg.mesh.num_devices] if cfg.mesh.num_devices else None
  mesh = sharding.make_mesh(cfg.mesh.shape, devices)
  config_lib.validate_agent_grpo(cfg, mesh.shape["data"] * mesh.shape["fsdp"])
  g = cfg.grpo
  B, G, H = g.num_tasks, g.num_episodes, g.horizon
  agent = load_agent(cfg.agent, mesh=mesh, **cfg.sample.to_dict())
  tok = agent.model.tokenizer
  pool_tasks = tasks_lib.task_list(cfg.env, cfg.tasks.split, cfg.tasks.per_env)
  if len(pool_tasks) < B:
    raise ValueError(f"config.grpo.num_tasks: {B} tasks per step, but {cfg.env!r} has only "
                     f"{len(pool_tasks)} in split {cfg.tasks.split!r}")
  real = cfg.env_backend == "real"
  env_pool = EnvPool()
  if real:
    simulator = RealSimulator()
  else:
    simulator = WorldModelSimulator(
        WorldModel.load(cfg.world_model, mesh=mesh),
        lambda env: success_fn or success_lib.default_success_fn(env),
        **cfg.world_model_sample.to_dict())
  learner = loop.make_learner(
      agent.model.params, cfg, mesh,
      loop.logprob_fn(agent.model.graphdef, "ar", g, tok.mask_id,
                      agent.model.cfg.diffusion.schedule))
  print(f"agent GRPO in {'the real environment' if real else 'a world model'} on {cfg.env} "
        f"({len(pool_tasks)} tasks of {cfg.tasks.split}): agent {agent.model.num_params:,} "
        f"params, B x G = {B} x {G}, horizon {H}, mu {g.mu}", flush=True)

  def collect(step: int, params, key) -> tuple[dict, dict]:
    picks = np.random.default_rng([cfg.seed, step]).choice(len(pool_tasks), B, replace=False)
    episodes = env_pool.start([pool_tasks[i] for i in picks for _ in range(G)], live=real,
                              max_steps=H)
    recorder = ActionRecorder(agent, params, derive_seed(cfg.seed, step, 0))
    times = run_episodes(episodes, recorder, simulator, seed=derive_seed(cfg.seed, step, 1))
    t0 = time.perf_counter()
    rewards_BG = np.array([episode_reward(ep, cfg.reward, H) for ep in episodes]).reshape(B, G)
    advantages = grpo.group_advantages(rewards_BG, g.advantage).reshape(-1)
    host = recorder.batch(episodes, advantages, eot_id=tok.eot_id, multiple=B * G)
    t1 = time.perf_counter()
    batch, entropy = learner.prepare(host, key)
    actions = int(sum(ep.steps for ep in episodes))
    return {
        "success_rate": float(np.mean([ep.success for ep in episodes])),
        "reward_mean": float(rewards_BG.mean()),
        "reward_std": float(rewards_BG.std()),
        "zero_spread": grpo.zero_spread_fraction(rewards_BG),
        "episode_length": actions / len(episodes),
        "actions": float(actions),
        "action_tokens": float(host["mask"].sum() / max(actions, 1)),
        "entropy": entropy,
        "errors": float(sum(ep.error is not None for ep in episodes)),
        **times, "time_score": t1 - t0, "time_logprob": time.perf_counter() - t1,
    }, batch

  evals: dict = {}
  eval_tasks = (tasks_lib.task_list(cfg.env, cfg.train.eval_split, cfg.train.eval_episodes)
                if cfg.train.eval_episodes else [])

  def run_eval(step: int, params) -> dict:
    report = evaluate_lib.evaluate(
        PolicyAgent(agent.model, params, **cfg.sample.to_dict()), eval_tasks,
        max_steps=cfg.train.eval_max_steps or None, batch_size=B * G, seed=cfg.seed,
        pool=env_pool, label=f"eval @ step {step}")
    os.makedirs(os.path.join(workdir, EVAL_DIR), exist_ok=True)
    with open(os.path.join(workdir, EVAL_DIR, f"real.step{step}.json"), "w") as f:
      json.dump({"step": step, **report}, f, indent=1)
    means = {k: v["mean"] for k, v in report["overall"].items()}
    evals.update(step=step, **means)
    print(f"eval @ step {step}: " + evaluate_lib.format_report(report).splitlines()[0],
          flush=True)
    return means

  try:
    result = loop.run_loop(
        cfg, workdir, learner, tokenizer=tok,
        meta=loop.checkpoint_meta(agent.model.cfg, tok.vocab_size, cfg, cfg.agent),
        collect=collect, evaluate=run_eval if eval_tasks else None,
        rollouts_per_step=B * G, rate_key="episodes_per_sec", progress_keys=PROGRESS_KEYS,
        max_steps=max_steps)
  finally:
    env_pool.close()
  return AgentGRPOResult(step=result.step, metrics=result.metrics, evals=evals,
                         preempted=result.preempted, steps_run=result.steps_run)
