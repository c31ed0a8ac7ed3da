"""A plan, not a run: Llama-3-8B shapes (8.0B params with its 128256-token vocabulary).

The scale a pretrained 8B checkpoint would be fine-tuned at (launch.import_hf
sets the model keys from its config.json; these match Llama-3-8B). Sized with
launch.aot on compile-only TPU v5e devices (docs/scaling.md): on 64
chips of 16 GiB, FSDP over 16 x tensor parallelism over 4 (heads, MLP and
vocabulary split 4 ways) with 2 sequences of 2048 per FSDP shard peaks at
6.5 GiB per chip; FSDP alone asks for 17.1 GiB even at one sequence per chip.
"""

from configs import base_1b


def get_config():
  cfg = base_1b.get_config()  # the 1B's data layout, bf16 compute, full remat, FSDP
  cfg.data.batch_size = 32
  cfg.model.d_model = 4096
  cfg.model.n_layers = 32
  cfg.model.n_heads = 32
  cfg.model.n_kv_heads = 8
  cfg.model.d_ff = 14336
  cfg.model.rope_base = 500_000.0
  cfg.model.norm_eps = 1e-5
  cfg.model.tie_embeddings = False
  cfg.optim.lr = 1e-4
  cfg.mesh.shape = (1, -1, 4)  # FSDP x tensor parallel
  return cfg
