"""Shared settings of the study: same data, tokenizer, tokens and schedule for all models."""

from mdlm_wm.config import base_config

# Sized so that all three models train in about 90 minutes in total on the
# 2-core CPU box (MDLM S ~4.5k, AR S ~4.9k, AR 4x ~2.0k tokens/s measured):
# the 4x model costs as much as the two S models together.
# Model S: 1.12M params with a 4096-piece vocabulary (tied embeddings).
SIZE_S = dict(d_model=128, n_layers=3, n_heads=4, n_kv_heads=2, d_ff=384)
# 4x S: 4.39M params (3.96 x S).
SIZE_4X = dict(d_model=256, n_layers=4, n_heads=4, n_kv_heads=2, d_ff=832)


def study_config(objective: str, size: dict):
  cfg = base_config()
  cfg.objective = objective
  cfg.corpus.episodes_per_env = 1000
  cfg.corpus.holdout_envs = "calendar"
  cfg.corpus.tokenizer_vocab = 4096
  cfg.data.batch_size = 16
  cfg.data.seq_len = 640
  cfg.data.max_context_len = 384
  cfg.data.max_target_len = 128
  cfg.data.history_len = 1
  for key, value in size.items():
    cfg.model[key] = value
  cfg.optim.lr = 2e-3
  cfg.optim.warmup_steps = 70
  cfg.train.steps = 700  # 700 x 16 x 512 = 5.73M tokens for every model
  cfg.train.log_every = 25
  cfg.train.eval_every = 175
  cfg.train.checkpoint_every = 100
  cfg.sample.block_size = 32
  return cfg
