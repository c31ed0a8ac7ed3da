"""Shared settings of the study: same data, tokenizer, tokens and schedule for all models."""

from mdlm_wm.config import base_config

# Model S: ~2.4M params with a 4096-piece vocabulary.
SIZE_S = dict(d_model=192, n_layers=4, n_heads=6, n_kv_heads=2, d_ff=512)
# ~4x S: ~9.4M params.
SIZE_4X = dict(d_model=384, n_layers=5, n_heads=6, n_kv_heads=2, d_ff=1024)


def study_config(objective: str, size: dict):
  cfg = base_config()
  cfg.objective = objective
  cfg.corpus.episodes_per_env = 1000
  cfg.corpus.holdout_envs = "calendar"
  cfg.corpus.tokenizer_vocab = 4096
  cfg.data.batch_size = 16
  cfg.data.seq_len = 512
  cfg.data.max_context_len = 384
  cfg.data.max_target_len = 128
  cfg.data.target_fill_multiple = 128
  cfg.data.history_len = 1
  for key, value in size.items():
    cfg.model[key] = value
  cfg.optim.lr = 2e-3
  cfg.optim.warmup_steps = 200
  cfg.train.steps = 4000  # 4000 x 16 x 512 = 32.8M tokens for every model
  cfg.train.log_every = 50
  cfg.train.eval_every = 500
  cfg.train.checkpoint_every = 500
  cfg.sample.block_size = 32
  return cfg
