"""The experiment config: shared defaults, validation in one place, typed views.

Every `configs/*.py` file starts from `base_config()` and overrides what its
experiment changes; `validate(cfg)` is the single place that rejects bad
values (with the config key in the message), and the `*_config(cfg, ...)`
functions turn the ConfigDict into the typed, frozen configs the library
uses.

One source per default and per rule: the `model` and `sample` blocks take
their defaults from the library's dataclasses (ModelConfig, the samplers),
and `validate` runs those dataclasses' own validators on the typed views
(their messages name the field; `validate` prefixes the block), so a rule is
written once. The name lists here (objectives, GRPO modes, rewards, splits)
are the ones the layers above use.
"""

from __future__ import annotations

import contextlib
import dataclasses

import ml_collections
from ml_collections import config_dict

from mdlm_wm.ar import decode as ar_decode
from mdlm_wm.data.block_rows import check_seq_len
from mdlm_wm.data.delta import TARGETS
from mdlm_wm.data.schema import SPLITS
from mdlm_wm.data.serialize import TOOLS_FORMATS, Serializer, parse_anchors
from mdlm_wm.diffusion import block_sampler
from mdlm_wm.diffusion import sampler as mdlm_sampler
from mdlm_wm.diffusion.schedule import SCHEDULES
from mdlm_wm.model.sharding import DEFAULT_RULES
from mdlm_wm.model.transformer import ATTENTION_MODES, ModelConfig

# What `objective` may be: train/objectives.py has a loss for each.
OBJECTIVES = ("mdlm", "ar")

# The library's defaults: the one source of the `model` and `sample` blocks.
_MODEL_DEFAULTS = {f.name: f.default for f in dataclasses.fields(ModelConfig)
                   if f.name != "vocab_size"}
_SAMPLE_DEFAULTS = {
    **{k: getattr(mdlm_sampler.SamplerConfig, k)
       for k in ("steps", "temperature", "top_p", "confidence", "block_size", "cfg_scale",
                 "use_prefix_cache")},
    "threshold": block_sampler.BlockSamplerConfig.threshold}


def optim_config(*, lr: float, warmup_steps: int, min_lr_ratio: float,
                 weight_decay: float) -> ml_collections.ConfigDict:
  """AdamW with warmup and cosine decay (train/state.py make_optimizer)."""
  return ml_collections.ConfigDict(dict(
      lr=lr, warmup_steps=warmup_steps, min_lr_ratio=min_lr_ratio, weight_decay=weight_decay,
      b1=0.9, b2=0.98, clip_norm=1.0))


def base_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.objective = "mdlm"  # mdlm | ar
  c.seed = 0

  c.corpus = ml_collections.ConfigDict()  # used by launch.quickstart
  c.corpus.envs = "all"
  c.corpus.episodes_per_env = 60
  c.corpus.seed = 0
  c.corpus.holdout_envs = ""
  c.corpus.tokenizer_vocab = 4096

  c.data = ml_collections.ConfigDict()
  c.data.train = ""  # comma-separated JSONL files
  c.data.valid = ""
  c.data.tokenizer = ""  # a tokenizer.model file
  c.data.batch_size = 8
  c.data.seq_len = 1280  # max_context_len + 2 * max_target_len: the MDLM rows hold two copies
  c.data.max_context_len = 768
  c.data.max_target_len = 256
  c.data.history_len = 1
  # Tool schemas as one signature line per tool (data/serialize.py); "json":
  # the full JSON schema, as models trained before the signature line read them.
  c.data.tools_format = "signature"
  # Anchors the model never reads (comma-separated of s0, task, tools, rules,
  # steer): the training-time half of an anchor ablation.
  c.data.ablate = ""
  # What the model writes: "state", s_{t+1} whole, or "delta", s_{t+1} as its
  # change from s_t: the status entries that changed, "=" for JSON values and
  # lines that repeat s_t (data/delta.py); the world model writes the state back.
  c.data.target = "state"
  c.data.read_threads = 2

  # The backbone's fields and defaults (model/transformer.py ModelConfig; the
  # vocabulary comes with the tokenizer), but attention: auto is bidirectional
  # for mdlm and causal for ar (or give one of transformer.ATTENTION_MODES).
  c.model = ml_collections.ConfigDict(_MODEL_DEFAULTS)
  c.model.attention = "auto"

  c.diffusion = ml_collections.ConfigDict()
  c.diffusion.schedule = "loglinear"
  c.diffusion.steer_drop_rate = 0.1
  # Block diffusion (diffusion/block.py): blocks of this many target tokens;
  # 0 or >= data.max_target_len: the full-canvas MDLM (one block).
  c.diffusion.block_size = 8
  # Slot j holds the token before label j, as in an AR model: with b = 1 the
  # objective is the AR loss, so an AR start (train.init_from) loses nothing.
  c.diffusion.shift = True
  # Training times t ~ U[t_min, t_max] (BD3-LM's clipped schedule); the
  # validation loss always uses [0.001, 1], the full ELBO.
  c.diffusion.t_min = 1e-3
  c.diffusion.t_max = 1.0
  # Attention annealing for an AR start: over this many steps, in-block
  # attention opens from causal to bidirectional (0: bidirectional at once).
  c.diffusion.anneal_steps = 0
  # > 0 (with the shift): the clean copy of the target is causal inside its
  # block, as the AR's, and trained with the AR's next-token loss at this
  # weight beside the block ELBO (the optimizer's loss; `loss` stays the ELBO).
  # 0: the plain block ELBO. Measured on the quickstart (configs/quickstart.py)
  # at 0 / 0.5 / 1 / 2 / 4; 2 scored best on the env check.
  c.diffusion.clean_ar_weight = 2.0

  c.optim = optim_config(lr=3e-3, warmup_steps=50, min_lr_ratio=0.1, weight_decay=0.01)

  c.train = ml_collections.ConfigDict()
  c.train.steps = 500
  c.train.log_every = 10
  c.train.eval_every = 100
  c.train.eval_batches = 4
  c.train.checkpoint_every = 100
  c.train.keep_checkpoints = 2
  c.train.nan_policy = "stop"  # stop | skip
  c.train.tensorboard = True
  # A workdir (e.g. from launch.import_hf) whose latest params start a fresh
  # run; its model must match config.model up to attention, dtype and remat.
  c.train.init_from = ""
  c.train.init_step = 0  # init_from's checkpoint step; 0: its latest
  # launch.quickstart: the MDLM starts from its AR twin's checkpoint at this
  # step and trains train.steps - ar_start_steps more, so both models get the
  # same total budget of train.steps (0: the MDLM trains from scratch).
  c.train.ar_start_steps = 0
  c.train.ar_start_lr = 0.0  # the MDLM's peak learning rate after an AR start (0: optim.lr)

  c.mesh = ml_collections.ConfigDict()
  c.mesh.shape = (-1, 1, 1)  # (data, fsdp, tensor); -1 takes the remaining devices
  c.mesh.num_devices = 0  # 0: every device; n: the first n (e.g. 1 for a baseline)
  c.mesh.rules = tuple(DEFAULT_RULES)

  # The samplers' defaults (sampler_config below builds the sampler from them):
  # steps, temperature, top_p, confidence, cfg_scale; block_size: block MDLMs
  # sample in the trained diffusion.block_size when 0, and `steps` is per
  # block; an MDLM without blocks (an older checkpoint): 0 is one block and
  # `steps` is the total; threshold: block MDLMs commit every label more
  # confident than this (0: off); use_prefix_cache: full-canvas sampler only.
  c.sample = ml_collections.ConfigDict(_SAMPLE_DEFAULTS)
  c.sample.num_samples = 4
  # WorldModel.redraw: a sample the caller's check rejects (the environment's
  # parser, where the caller knows the environment) is drawn again up to this
  # many times, a greedy one at retry_temperature. 0: off.
  c.sample.format_retries = 0
  c.sample.retry_temperature = 0.7

  c.eval = ml_collections.ConfigDict()  # the quickstart's side-by-side table
  c.eval.examples_per_env = 10
  c.eval.batch_size = 16
  return c


def attention_mode(cfg) -> str:
  if cfg.model.attention != "auto":
    return cfg.model.attention
  return "causal" if cfg.objective == "ar" else "bidirectional"


def _check(ok: bool, key: str, msg: str) -> None:
  if not ok:
    raise ValueError(f"config.{key}: {msg}")


@contextlib.contextmanager
def _library_rules(block: str):
  """Reports a library validator's ValueError, whose message names the field
  first (`steps: must be >= 1`), under the config key `config.<block>.<field>`."""
  try:
    yield
  except ValueError as e:
    raise ValueError(f"config.{block}.{e}") from None


def validate(cfg) -> None:
  """Raises ValueError naming the first bad key."""
  _check(cfg.objective in OBJECTIVES, "objective", f"must be one of {OBJECTIVES}")
  mode = attention_mode(cfg)
  _check(mode in ATTENTION_MODES, "model.attention", f"must be auto or one of {ATTENTION_MODES}")
  _check(cfg.objective != "ar" or mode == "causal", "model.attention",
         "the AR objective needs causal attention")
  _check(cfg.objective != "mdlm" or mode != "causal", "model.attention",
         "the MDLM objective needs bidirectional or prefix attention")
  d = cfg.data
  for key in ("batch_size", "seq_len", "max_context_len", "max_target_len", "read_threads"):
    _check(d[key] >= 1, f"data.{key}", "must be >= 1")
  _check(d.history_len >= 0, "data.history_len", "must be >= 0")
  _check(tools_format(cfg) in TOOLS_FORMATS, "data.tools_format", f"must be one of {TOOLS_FORMATS}")
  ablated(cfg)  # raises naming data.ablate
  _check(target(cfg) in TARGETS, "data.target", f"must be one of {TARGETS}")
  _check(d.max_target_len >= 2, "data.max_target_len", "must be >= 2")
  with _library_rules("data"):  # the pipeline's rule: MDLM rows hold the target twice
    check_seq_len(d.seq_len, d.max_context_len, d.max_target_len, block=block_size(cfg) > 0)
  _check(cfg.diffusion.block_size >= 0, "diffusion.block_size", "must be >= 0")
  _check(0 < cfg.diffusion.t_min < cfg.diffusion.t_max <= 1, "diffusion.t_min",
         "must satisfy 0 < t_min < t_max <= 1")
  _check(cfg.diffusion.get("anneal_steps", 0) >= 0, "diffusion.anneal_steps", "must be >= 0")
  w = cfg.diffusion.get("clean_ar_weight", 0.0)
  _check(w >= 0, "diffusion.clean_ar_weight", "must be >= 0")
  _check(w == 0 or bool(cfg.diffusion.shift), "diffusion.clean_ar_weight",
         "needs diffusion.shift (the clean copy's slots hold the token before their label); "
         "set it to 0 to train without the shift")
  with _library_rules("model"):
    # Any vocabulary: the tokenizer's comes later, and no model rule reads it.
    model_config(cfg, vocab_size=1).validate()
  _check(cfg.diffusion.schedule in SCHEDULES, "diffusion.schedule", f"must be one of {SCHEDULES}")
  _check(0 <= cfg.diffusion.steer_drop_rate < 1, "diffusion.steer_drop_rate",
         "must be in [0, 1)")
  o = cfg.optim
  _check(o.lr > 0, "optim.lr", "must be > 0")
  _check(0 <= o.min_lr_ratio <= 1, "optim.min_lr_ratio", "must be in [0, 1]")
  _check(o.clip_norm >= 0, "optim.clip_norm", "must be >= 0 (0: off)")
  t = cfg.train
  _check(t.steps >= 1, "train.steps", "must be >= 1")
  _check(0 <= o.warmup_steps < t.steps, "optim.warmup_steps", "must be in [0, train.steps)")
  for key in ("log_every", "eval_every", "checkpoint_every", "keep_checkpoints"):
    _check(t[key] >= 1, f"train.{key}", "must be >= 1")
  _check(t.eval_batches >= 0, "train.eval_batches", "must be >= 0")
  _check(t.init_step >= 0, "train.init_step", "must be >= 0 (0: the latest)")
  _check(0 <= t.ar_start_steps < t.steps, "train.ar_start_steps", "must be in [0, train.steps)")
  _check(t.ar_start_lr >= 0, "train.ar_start_lr", "must be >= 0 (0: optim.lr)")
  _check(t.nan_policy in ("stop", "skip"), "train.nan_policy", "must be stop or skip")
  _check(len(cfg.mesh.shape) == 3, "mesh.shape", "must have 3 entries (data, fsdp, tensor)")
  _check(cfg.mesh.num_devices >= 0, "mesh.num_devices", "must be >= 0")
  _check(cfg.sample.num_samples >= 1, "sample.num_samples", "must be >= 1")
  _check(cfg.sample.format_retries >= 0, "sample.format_retries", "must be >= 0")
  _check(cfg.sample.retry_temperature > 0, "sample.retry_temperature", "must be > 0")
  with _library_rules("sample"):
    sampler_config(cfg)
  _check(cfg.eval.examples_per_env >= 1, "eval.examples_per_env", "must be >= 1")
  _check(cfg.eval.batch_size >= 1, "eval.batch_size", "must be >= 1")


# ------------------------------------------------------------------ GRPO

# The names rl/ implements (grpo.group_advantages, grpo.kl_penalty, the
# log-prob estimators, rewards.combine) and takes from here.
ADVANTAGE_MODES = ("std", "mean", "loo")
KL_ESTIMATORS = ("k1", "k2", "k3")
MDLM_LOGPROBS = ("coupled", "one_step")
REWARD_KEYS = ("state_check", "passed", "format", "bleu1", "rouge_l", "length")


# The sampler settings a caller may override (WorldModel.decode_config), with
# their types: GRPO's `sample` and `eval_sample` blocks leave them unset.
SAMPLER_SETTINGS = {k: type(v) for k, v in _SAMPLE_DEFAULTS.items() if k != "use_prefix_cache"}


def grpo_base_config() -> ml_collections.ConfigDict:
  """World-model GRPO: the model, tokenizer and data layout come from the
  supervised checkpoint (`init`); this config holds what GRPO changes."""
  c = ml_collections.ConfigDict()
  c.init = ""  # the supervised (SFT) workdir; launch.grpo's --init sets it
  c.seed = 0

  c.data = ml_collections.ConfigDict()
  c.data.train = ""  # comma-separated JSONL; "" = the SFT run's data.train
  c.data.eval = ""  # comma-separated JSONL splits scored before, during and after

  c.grpo = ml_collections.ConfigDict()
  c.grpo.num_prompts = 8  # B transitions per step
  c.grpo.num_generations = 4  # G next states per transition
  c.grpo.mu = 2  # policy-gradient updates per batch of rollouts
  c.grpo.clip_eps = 0.2
  c.grpo.beta = 0.02  # KL to the frozen SFT model
  c.grpo.kl_estimator = "k3"
  c.grpo.advantage = "std"
  c.grpo.mdlm_logprob = "coupled"  # the AR path is always exact
  c.grpo.prompt_mask_rate = 0.15  # one_step only (d1's random prompt masking)
  c.grpo.reward_on_error = 0.0  # reward of a callback that raises or returns NaN/inf
  c.grpo.score_threads = 0  # 0: score on the main thread

  c.rewards = ml_collections.ConfigDict()  # weights; 0 turns a term off
  c.rewards.state_check = 1.0
  c.rewards.passed = 0.0  # evaluation's pass (state_check == 1) as a 0/1 reward
  c.rewards.format = 0.0
  c.rewards.bleu1 = 0.0
  c.rewards.rouge_l = 0.0
  c.rewards.length = 0.0

  c.sample = ml_collections.ConfigDict()  # rollout sampling (MDLM steps ignored by AR)
  c.sample.steps = 16
  c.sample.temperature = 1.0
  # None: the world model's own `config.sample` value (MDLM only but top_p).
  for name, kind in SAMPLER_SETTINGS.items():
    if name not in c.sample:
      c.sample[name] = config_dict.placeholder(kind)
  # The in-loop evaluation's sampler settings where they differ from the
  # rollouts' (unset: as `sample`); e.g. temperature 0 with
  # train.eval_samples 1 for a greedy evaluation.
  c.eval_sample = ml_collections.ConfigDict(
      {name: config_dict.placeholder(kind) for name, kind in SAMPLER_SETTINGS.items()})

  # min_lr_ratio 1: constant after warmup.
  c.optim = optim_config(lr=1e-4, warmup_steps=5, min_lr_ratio=1.0, weight_decay=0.0)

  c.train = ml_collections.ConfigDict()
  c.train.steps = 100
  c.train.log_every = 5
  c.train.eval_every = 50
  c.train.eval_examples = 96  # per eval split; 0: all
  c.train.eval_samples = 4
  # False: no step-0 evaluation (a sweep whose starting model one run already
  # evaluated; launch.compare can pair that run's step-0 predictions).
  c.train.eval_at_start = True
  c.train.checkpoint_every = 25
  c.train.keep_checkpoints = 2
  c.train.tensorboard = True

  c.mesh = ml_collections.ConfigDict()
  c.mesh.shape = (-1, 1, 1)
  c.mesh.num_devices = 0
  return c


def _validate_policy_gradient(cfg) -> None:
  """The `grpo` update keys and the optim / train / mesh keys that world-model
  and agent GRPO share."""
  g = cfg.grpo
  _check(g.mu >= 1, "grpo.mu", "must be >= 1")
  _check(g.clip_eps > 0, "grpo.clip_eps", "must be > 0")
  _check(g.beta >= 0, "grpo.beta", "must be >= 0")
  _check(g.kl_estimator in KL_ESTIMATORS, "grpo.kl_estimator", f"must be one of {KL_ESTIMATORS}")
  _check(g.advantage in ADVANTAGE_MODES, "grpo.advantage", f"must be one of {ADVANTAGE_MODES}")
  o, t = cfg.optim, cfg.train
  _check(o.lr > 0, "optim.lr", "must be > 0")
  _check(0 <= o.min_lr_ratio <= 1, "optim.min_lr_ratio", "must be in [0, 1]")
  _check(o.clip_norm >= 0, "optim.clip_norm", "must be >= 0 (0: off)")
  _check(t.steps >= 1, "train.steps", "must be >= 1")
  _check(0 <= o.warmup_steps < t.steps, "optim.warmup_steps", "must be in [0, train.steps)")
  for key in ("log_every", "eval_every", "checkpoint_every", "keep_checkpoints"):
    _check(t[key] >= 1, f"train.{key}", "must be >= 1")
  _check(len(cfg.mesh.shape) == 3, "mesh.shape", "must have 3 entries (data, fsdp, tensor)")


def validate_grpo(cfg, batch_shards: int = 1) -> None:
  """Raises ValueError naming the first bad key; `batch_shards` is the mesh's
  data x fsdp size, which must divide the B x G rollouts of a step."""
  g = cfg.grpo
  _check(g.num_prompts >= 1, "grpo.num_prompts", "must be >= 1")
  _check(g.num_generations >= 2, "grpo.num_generations",
         "must be >= 2 (advantages are relative to the group)")
  _validate_policy_gradient(cfg)
  _check(g.mdlm_logprob in MDLM_LOGPROBS, "grpo.mdlm_logprob", f"must be one of {MDLM_LOGPROBS}")
  _check(0 <= g.prompt_mask_rate < 1, "grpo.prompt_mask_rate", "must be in [0, 1)")
  _check(g.score_threads >= 0, "grpo.score_threads", "must be >= 0")
  rollouts = g.num_prompts * g.num_generations
  _check(rollouts % batch_shards == 0, "grpo.num_prompts",
         f"num_prompts x num_generations ({rollouts}) must be divisible by the mesh's "
         f"data x fsdp size ({batch_shards})")
  unknown = set(cfg.rewards.keys()) - set(REWARD_KEYS)
  _check(not unknown, "rewards", f"unknown reward(s) {sorted(unknown)}; known: {REWARD_KEYS}")
  _check(any(cfg.rewards[k] != 0 for k in cfg.rewards.keys()), "rewards",
         "at least one reward weight must be nonzero")
  _check(cfg.sample.steps >= 1, "sample.steps", "must be >= 1")
  _check(cfg.sample.temperature > 0, "sample.temperature",
         "must be > 0 (greedy rollouts give every group zero spread)")
  _check(cfg.train.eval_samples >= 1, "train.eval_samples", "must be >= 1")
  _check(cfg.train.eval_examples >= 0, "train.eval_examples", "must be >= 0")


# ------------------------------------------------------------------ agent GRPO

ENV_BACKENDS = ("wm", "real")
AGENT_REWARD_KEYS = ("success", "progress", "step_cost")  # agents/grpo.episode_reward's terms
TASK_SPLITS = SPLITS  # a real environment's seed splits (envs/adapters), a corpus's files


def agent_grpo_base_config() -> ml_collections.ConfigDict:
  """Agent GRPO (agents/grpo.py): a behaviour-cloned agent acts in a world
  model (or the real environment) from real starts; reward = task success."""
  c = ml_collections.ConfigDict()
  c.agent = ""  # the BC agent's workdir (--agent); also the KL reference
  c.world_model = ""  # the world model's workdir (--world_model); unused when env_backend=real
  c.env = ""  # where the tasks come from (--env): built-in, family/task, family, or a list
  c.env_backend = "wm"  # wm: the world model predicts every next state; real: env.step does
  c.seed = 0

  c.tasks = ml_collections.ConfigDict()
  c.tasks.split = "train"  # task seeds come from this split (agents/tasks.py)
  c.tasks.per_env = 1000  # at most this many seeds per environment

  c.grpo = ml_collections.ConfigDict()
  c.grpo.num_tasks = 4  # B tasks per step
  c.grpo.num_episodes = 4  # G episodes per task: the group of the advantages
  c.grpo.horizon = 10  # H: an episode's step limit
  c.grpo.mu = 2
  c.grpo.clip_eps = 0.2
  c.grpo.beta = 0.02  # KL to the frozen BC agent
  c.grpo.kl_estimator = "k3"
  c.grpo.advantage = "std"

  # An episode's reward: success * [solved] + progress * (a/b of the last
  # state's progress or goal fraction) - step_cost * steps / horizon.
  c.reward = ml_collections.ConfigDict()
  c.reward.success = 1.0
  c.reward.progress = 0.0
  c.reward.step_cost = 0.0

  c.sample = ml_collections.ConfigDict()  # the agent's actions
  c.sample.temperature = 1.0
  c.world_model_sample = ml_collections.ConfigDict()  # the world model's next states
  c.world_model_sample.steps = 16  # MDLM denoising steps (AR ignores it)
  c.world_model_sample.temperature = 1.0

  c.optim = optim_config(lr=1e-4, warmup_steps=5, min_lr_ratio=1.0, weight_decay=0.0)

  c.train = ml_collections.ConfigDict()
  c.train.steps = 100
  c.train.log_every = 5
  c.train.eval_every = 25
  # Evaluation in the REAL environment (0: none): this many tasks of
  # eval_split per environment, up to eval_max_steps steps (0: the
  # environment's own limit).
  c.train.eval_episodes = 0
  c.train.eval_split = "valid"
  c.train.eval_max_steps = 0
  c.train.eval_at_start = True  # False: no step-0 evaluation
  c.train.checkpoint_every = 25
  c.train.keep_checkpoints = 2
  c.train.tensorboard = True

  c.mesh = ml_collections.ConfigDict()
  c.mesh.shape = (-1, 1, 1)
  c.mesh.num_devices = 0
  return c


def validate_agent_grpo(cfg, batch_shards: int = 1) -> None:
  """Raises ValueError naming the first bad key; `batch_shards` (the mesh's
  data x fsdp size) must divide the B x G episodes of a step."""
  _check(bool(cfg.agent), "agent", "give the BC agent's workdir (--agent)")
  _check(bool(cfg.env), "env", "give the environment(s) the tasks come from (--env)")
  _check(cfg.env_backend in ENV_BACKENDS, "env_backend", f"must be one of {ENV_BACKENDS}")
  _check(cfg.env_backend != "wm" or bool(cfg.world_model), "world_model",
         "give the world model's workdir (--world_model) or use env_backend=real")
  _check(cfg.tasks.split in TASK_SPLITS, "tasks.split", f"must be one of {TASK_SPLITS}")
  g = cfg.grpo
  _check(g.num_tasks >= 1, "grpo.num_tasks", "must be >= 1")
  _check(g.num_episodes >= 2, "grpo.num_episodes",
         "must be >= 2 (advantages are relative to the group)")
  _check(g.horizon >= 1, "grpo.horizon", "must be >= 1")
  _check(cfg.tasks.per_env >= 1, "tasks.per_env", "must be >= 1")
  _validate_policy_gradient(cfg)
  episodes = g.num_tasks * g.num_episodes
  _check(episodes % batch_shards == 0, "grpo.num_tasks",
         f"num_tasks x num_episodes ({episodes}) must be divisible by the mesh's data x fsdp "
         f"size ({batch_shards})")
  unknown = set(cfg.reward.keys()) - set(AGENT_REWARD_KEYS)
  _check(not unknown, "reward", f"unknown term(s) {sorted(unknown)}; known: {AGENT_REWARD_KEYS}")
  _check(cfg.reward.success != 0 or cfg.reward.progress != 0, "reward",
         "reward.success or reward.progress must be nonzero")
  _check(cfg.reward.step_cost >= 0, "reward.step_cost", "must be >= 0")
  _check(cfg.sample.temperature > 0, "sample.temperature",
         "must be > 0 (greedy agents give every group zero spread)")
  _check(cfg.world_model_sample.steps >= 1, "world_model_sample.steps", "must be >= 1")
  _check(cfg.world_model_sample.temperature >= 0, "world_model_sample.temperature",
         "must be >= 0")
  _check(cfg.train.eval_episodes >= 0, "train.eval_episodes", "must be >= 0")
  _check(cfg.train.eval_max_steps >= 0, "train.eval_max_steps", "must be >= 0")
  _check(cfg.train.eval_split in TASK_SPLITS, "train.eval_split", f"must be one of {TASK_SPLITS}")


def model_config(cfg, vocab_size: int) -> ModelConfig:
  """The model of `cfg`; keys newer than a checkpoint's saved config take
  ModelConfig's defaults, so older workdirs still load."""
  m = cfg.model
  defaults = ModelConfig(vocab_size=vocab_size)
  newer = {k: m.get(k, getattr(defaults, k))
           for k in ("d_head", "rope_base", "norm_eps", "qkv_bias", "qk_norm")}
  return ModelConfig(vocab_size=vocab_size, d_model=m.d_model, n_layers=m.n_layers,
                     n_heads=m.n_heads, n_kv_heads=m.n_kv_heads, d_ff=m.d_ff,
                     attention=attention_mode(cfg), tie_embeddings=m.tie_embeddings,
                     dtype=m.dtype, remat=m.remat, **newer)


def sampler_config(cfg, *, eot_id: int | None = None, **overrides
                   ) -> (mdlm_sampler.SamplerConfig | block_sampler.BlockSamplerConfig
                         | ar_decode.DecodeConfig):
  """The decoder of the model `cfg` describes, with its `sample` settings and
  `overrides` (WorldModel.decode_config): the block sampler for block-diffusion
  MDLMs, the full-canvas sampler for MDLMs without blocks, the AR decoder
  (temperature and top_p only; it ignores the MDLM settings). Validated
  against the canvas: ValueError naming the setting (`threshold: ...`).
  Sample keys newer than a checkpoint's config take today's defaults."""
  known = (*SAMPLER_SETTINGS, "use_prefix_cache")
  unknown = sorted(set(overrides) - set(known))
  if unknown:
    raise ValueError(f"unknown sample settings {unknown}; known: {list(known)}")
  s = {**_SAMPLE_DEFAULTS, **cfg.sample.to_dict(), **overrides}
  canvas = cfg.data.max_target_len
  if is_block_model(cfg):
    out = block_sampler.BlockSamplerConfig(
        block_size=s["block_size"] or block_size(cfg), steps=s["steps"],
        temperature=s["temperature"], top_p=s["top_p"], confidence=s["confidence"],
        threshold=s["threshold"], cfg_scale=s["cfg_scale"], schedule=cfg.diffusion.schedule,
        shift=bool(cfg.diffusion.shift), causal_clean=causal_clean(cfg))
    out.validate()
  elif cfg.objective == "ar":
    out = ar_decode.DecodeConfig(max_len=canvas, temperature=s["temperature"],
                                 top_p=s["top_p"], eot_id=eot_id)
    out.validate()
  else:
    out = mdlm_sampler.SamplerConfig(
        steps=s["steps"], temperature=s["temperature"], top_p=s["top_p"],
        confidence=s["confidence"], schedule=cfg.diffusion.schedule,
        block_size=s["block_size"], cfg_scale=s["cfg_scale"],
        use_prefix_cache=s["use_prefix_cache"])
    out.validate(canvas)
  return out


def block_size(cfg) -> int:
  """The MDLM's block length in target tokens (the canvas for a full-canvas
  MDLM); 0 for the AR objective."""
  if cfg.objective != "mdlm":
    return 0
  b = cfg.diffusion.get("block_size") or 0
  return min(b, cfg.data.max_target_len) if b else cfg.data.max_target_len


def causal_clean(cfg) -> bool:
  """True when the block model's clean copy is causal inside its block
  (diffusion.clean_ar_weight > 0: it is trained with a next-token loss)."""
  return is_block_model(cfg) and cfg.diffusion.get("clean_ar_weight", 0.0) > 0


def tools_format(cfg) -> str:
  """How the model reads tool schemas; "json" for a config from before the
  signature line (data.tools_format), so an old workdir sees what it trained on."""
  return cfg.data.get("tools_format", "json")


def ablated(cfg) -> tuple[str, ...]:
  """The anchors a model of this config never reads (data.ablate; none for a
  config from before the key)."""
  return parse_anchors(cfg.data.get("ablate", ""), "data.ablate")


def target(cfg) -> str:
  """What a model of this config writes (data.target; "state" for a config
  from before the key)."""
  return cfg.data.get("target", "state")


def serializer(cfg, tokenizer) -> Serializer:
  """The serializer a model of this config reads its contexts with."""
  d = cfg.data
  return Serializer(tokenizer, d.max_context_len, d.max_target_len, d.history_len,
                    tools_format(cfg), ablated(cfg), target(cfg))


def is_block_model(cfg) -> bool:
  """True for MDLMs trained with the block-diffusion rows (a config from
  before them, without diffusion.block_size, samples with the full canvas)."""
  return cfg.objective == "mdlm" and cfg.diffusion.get("block_size") is not None


def sample_overrides(sample_cfg: ml_collections.ConfigDict) -> dict:
  """A `sample` block's settings without the unset (None) ones, which keep
  the world model's own value (WorldModel.decode_config applies the rest)."""
  return {k: v for k, v in sample_cfg.to_dict().items() if v is not None}


def split_paths(paths: str) -> list[str]:
  return [p.strip() for p in paths.split(",") if p.strip()]
