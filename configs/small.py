"""~11M parameters (with a 4096-piece vocabulary): the next size up from the
quickstart, for a GPU or a long CPU run (the CPU study's models are in
configs/study/)."""

from mdlm_wm.config import base_config


def get_config():
  cfg = base_config()
  cfg.corpus.episodes_per_env = 1000
  cfg.data.batch_size = 16
  cfg.data.seq_len = 1280
  cfg.data.max_context_len = 768
  cfg.data.max_target_len = 256
  cfg.data.history_len = 1
  cfg.model.d_model = 384
  cfg.model.n_layers = 6
  cfg.model.n_heads = 6
  cfg.model.n_kv_heads = 2
  cfg.model.d_ff = 1024
  cfg.optim.lr = 1e-3
  cfg.optim.warmup_steps = 200
  cfg.train.steps = 5000
  cfg.train.log_every = 20
  cfg.train.eval_every = 500
  cfg.train.checkpoint_every = 500
  return cfg
