"""~1B parameters: the accelerator-scale config (bf16 compute, remat, FSDP).

Sized for 8 chips of 16 GiB (e.g. TPU v5e-8), FSDP over all of them: 4
sequences of 2048 per chip; `launch.aot` measured 8.66 GiB peak per chip
(docs/scaling.md). On 16 chips, `--config.data.batch_size=64` keeps the
per-chip load.
"""

from mdlm_wm.config import base_config


def get_config():
  cfg = base_config()
  cfg.data.batch_size = 32
  cfg.data.seq_len = 2560
  cfg.data.max_context_len = 1536
  cfg.data.max_target_len = 512
  cfg.data.history_len = 2
  cfg.model.d_model = 2048
  cfg.model.n_layers = 20
  cfg.model.n_heads = 16
  cfg.model.n_kv_heads = 8
  cfg.model.d_ff = 5632
  cfg.model.dtype = "bfloat16"
  cfg.model.remat = "full"
  cfg.optim.lr = 3e-4
  cfg.optim.warmup_steps = 2000
  cfg.train.steps = 100_000
  cfg.train.log_every = 50
  cfg.train.eval_every = 2000
  cfg.train.checkpoint_every = 1000
  cfg.mesh.shape = (1, -1, 1)  # FSDP over every device
  return cfg
