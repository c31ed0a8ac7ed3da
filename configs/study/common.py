"""Shared settings of the study: same data, tokenizer, tokens and schedule for all models."""

from mdlm_wm.config import base_config

# Throughput on the 2-core CPU box (640-token rows): MDLM S ~4.5k, AR S ~4.9k,
# AR 4x ~2.0k tokens/s, so the 4x model costs as much as two S models; at
# 832-token rows (anchors whole) a step costs ~1.3x more (not re-timed).
# Model S: 1.12M params with a 4096-piece vocabulary (tied embeddings).
SIZE_S = dict(d_model=128, n_layers=3, n_heads=4, n_kv_heads=2, d_ff=384)
# 4x S: 4.39M params (3.96 x S).
SIZE_4X = dict(d_model=256, n_layers=4, n_heads=4, n_kv_heads=2, d_ff=832)


# The MDLMs start from AR S's checkpoint at this step and train the rest of
# the 700 (launch/study.sh passes --config.train.init_from/init_step/steps),
# so every model sees the same 700 x 16 rows of 832 tokens.
AR_START_STEPS = 500


def study_config(objective: str, size: dict, block_size: int = 8):
  cfg = base_config()
  cfg.objective = objective
  cfg.corpus.episodes_per_env = 1000
  cfg.corpus.holdout_envs = "calendar"
  cfg.corpus.tokenizer_vocab = 4096
  cfg.data.batch_size = 16
  # 576 context tokens keep all five anchors (s0, task, tools, rules, steer)
  # whole in 98.8% of the training examples (files, household, lab 100%, shop
  # 93%; `launch.check_data --config=...`); 384 kept them in 64% (shop 0%).
  cfg.data.seq_len = 832
  cfg.data.max_context_len = 576
  cfg.data.max_target_len = 128
  cfg.data.history_len = 1
  # What the quickstart measured (docs/results.md, 2026-12-07): writing the
  # next state as its change from s_t (AR env check 0.475 -> 0.584 on its
  # corpus), and drawing a state the environment's parser rejects again, up
  # to 8 times (MDLM 0.621 -> 0.733, AR 0.653 -> 0.747). The study's
  # evaluations sample at temperature 1, so a redraw keeps that temperature.
  cfg.data.target = "delta"
  cfg.sample.format_retries = 8
  for key, value in size.items():
    cfg.model[key] = value
  cfg.optim.lr = 2e-3
  cfg.optim.warmup_steps = 70
  cfg.train.steps = 700  # 700 x 16 x 832 = 9.32M row tokens for every model
  cfg.train.log_every = 25
  cfg.train.eval_every = 175
  cfg.train.checkpoint_every = 100
  cfg.train.keep_checkpoints = 8  # AR S's step AR_START_STEPS starts the MDLMs
  cfg.diffusion.block_size = block_size  # MDLM: 0 = the full canvas
  if objective == "mdlm":
    # Adapting AR S: a third of its peak rate, as the quickstart.
    cfg.optim.lr, cfg.optim.warmup_steps = 7e-4, 20
    if block_size:
      # Blocks sample one token a step; commit the leftmost free position first,
      # as the quickstart: it reads the left-to-right conditionals that
      # diffusion.clean_ar_weight trains. Shrunk study (session 10, 48 test
      # transitions): env check +0.029 at blocks of 4, +0.065 at blocks of 8
      # against the most confident position first (the sampler's default). The
      # full canvas keeps that default: at 64 steps for 128 tokens, left to right
      # commits two adjacent tokens a step, the second read without the first
      # (env check 0.207 against 0.516 on 16 test transitions).
      cfg.sample.confidence = "left_to_right"
  cfg.sample.steps = block_size or 64  # per block: one token a step
  return cfg
