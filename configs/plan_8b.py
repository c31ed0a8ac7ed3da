"""A plan, not a run: Llama-3-8B shapes (8.0B params with its 128256-token vocabulary).

The scale a pretrained 8B checkpoint would be fine-tuned at (launch.import_hf
sets the model keys from its config.json; these match Llama-3-8B). Sized with
launch.aot on compile-only TPU v5e devices (docs/scaling_aot.md): FSDP over
64 chips of 16 GiB, one sequence of 2048 tokens per chip (two do not fit
the 1B either, at the 8B's 128k vocabulary the logits alone double).
"""

from configs import base_1b


def get_config():
  cfg = base_1b.get_config()  # the 1B's data layout, bf16 compute, full remat, FSDP
  cfg.data.batch_size = 64
  cfg.model.d_model = 4096
  cfg.model.n_layers = 32
  cfg.model.n_heads = 32
  cfg.model.n_kv_heads = 8
  cfg.model.d_ff = 14336
  cfg.model.rope_base = 500_000.0
  cfg.model.norm_eps = 1e-5
  cfg.model.tie_embeddings = False
  cfg.optim.lr = 1e-4
  return cfg
