"""The quickstart: the default corpus, tiny MDLM and AR models, minutes on 2 CPU cores."""

from mdlm_wm.config import base_config


def get_config():
  cfg = base_config()
  cfg.corpus.episodes_per_env = 60
  cfg.corpus.tokenizer_vocab = 2048
  # Short contexts keep CPU steps cheap: tool schemas and rules are truncated
  # by the counted policy, the current state and action are kept.
  cfg.data.batch_size = 16
  cfg.data.seq_len = 512  # the MDLM's rows hold a noisy and a clean copy of the target
  cfg.data.max_context_len = 256
  cfg.data.max_target_len = 128
  cfg.data.history_len = 0
  cfg.model.d_model = 128
  cfg.model.n_layers = 2
  cfg.model.n_heads = 4
  cfg.model.n_kv_heads = 2
  cfg.model.d_ff = 384
  cfg.train.steps = 450
  cfg.optim.warmup_steps = 30
  cfg.train.log_every = 25
  cfg.train.eval_every = 150
  cfg.train.checkpoint_every = 150
  # The MDLM: the AR's step-300 checkpoint adapted to blocks of 8 for the
  # remaining 150 steps (450 in all, as the AR).
  cfg.train.ar_start_steps = 300
  cfg.diffusion.block_size = 8
  cfg.sample.steps = 8  # per block
  return cfg
