"""A seconds-scale model for tests and smoke runs ("runlocal")."""

from mdlm_wm.config import base_config


def get_config():
  cfg = base_config()
  cfg.corpus.episodes_per_env = 8
  cfg.corpus.tokenizer_vocab = 512
  cfg.data.batch_size = 8
  cfg.data.seq_len = 512
  cfg.data.max_context_len = 256
  cfg.data.max_target_len = 128
  cfg.data.history_len = 0
  cfg.model.d_model = 32
  cfg.model.n_layers = 2
  cfg.model.n_heads = 4
  cfg.model.n_kv_heads = 2
  cfg.model.d_ff = 64
  cfg.train.steps = 20
  cfg.train.log_every = 1
  cfg.train.eval_every = 10
  cfg.train.eval_batches = 1
  cfg.train.checkpoint_every = 5
  cfg.train.tensorboard = False
  cfg.optim.warmup_steps = 2
  cfg.sample.steps = 8
  return cfg
