"""A Hugging Face checkpoint as a world-model workdir (launch.import_hf).

`model/hf_import.py` converts the weights; this module writes what a
workdir holds (train/state.py): a step-0 checkpoint of the params with a
fresh optimizer state, the project tokenizer, and the config with its model
section set from the HF config.json, so `WorldModel.load` opens it and
`config.train.init_from` starts a fine-tuning run from it.
"""

from __future__ import annotations

import dataclasses
import os

import jax

from mdlm_wm import config as config_lib
from mdlm_wm.data.tokenizer import Tokenizer
from mdlm_wm.model import sharding
from mdlm_wm.model.hf_import import adapt_vocab, import_hf, model_config_from_hf, read_config
from mdlm_wm.train import state as train_state
from mdlm_wm.train.checkpoint import Checkpointer

# config.model keys set from the checkpoint (ModelConfig field names).
MODEL_KEYS = ("d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff", "d_head", "rope_base",
              "norm_eps", "qkv_bias", "qk_norm", "tie_embeddings")


def import_to_workdir(hf_dir: str, out: str, cfg, tokenizer: Tokenizer, embeddings: str) -> dict:
  """Writes the workdir; returns a summary (model config, rows copied, override flags)."""
  cfg = cfg.copy_and_resolve_references()
  hf = read_config(hf_dir)
  probe = model_config_from_hf(hf)
  with cfg.unlocked():
    for key in MODEL_KEYS:
      cfg.model[key] = getattr(probe, key)
    cfg.data.tokenizer = os.path.join(os.path.abspath(out), train_state.TOKENIZER_FILE)
    cfg.corpus.tokenizer_vocab = tokenizer.vocab_size
  config_lib.validate(cfg)
  devices = jax.devices()[:cfg.mesh.num_devices] if cfg.mesh.num_devices else None
  mesh = sharding.make_mesh(cfg.mesh.shape, devices)
  m = cfg.model
  model_cfg, _, params = import_hf(
      hf_dir, mesh=mesh, rules=cfg.mesh.rules, attention=config_lib.attention_mode(cfg),
      dtype=m.dtype, remat=m.remat)
  model_cfg, params, copied = adapt_vocab(model_cfg, params, tokenizer, embeddings,
                                          hf_dir=hf_dir, seed=cfg.seed)
  # The recorded config must rebuild exactly this model (WorldModel.load, init_from).
  assert config_lib.model_config(cfg, tokenizer.vocab_size) == model_cfg
  tx, _ = train_state.make_optimizer(cfg)
  with jax.set_mesh(mesh):
    state = train_state.init_train_state(params, tx)
  os.makedirs(out, exist_ok=True)
  tokenizer.save(cfg.data.tokenizer)
  summary = {"hf_dir": os.path.abspath(hf_dir), "model_type": hf["model_type"],
             "embeddings": embeddings, "rows_copied": copied}
  meta = {"config": cfg.to_dict(), "model": dataclasses.asdict(model_cfg),
          "tokenizer": train_state.TOKENIZER_FILE, "seed": cfg.seed, "hf_import": summary}
  ckpt = Checkpointer(os.path.join(out, train_state.CHECKPOINT_DIR), save_every=1, keep=1)
  ckpt.save(0, state, None, meta, force=True)
  ckpt.close()
  flags_ = [f"--config.model.{k}={cfg.model[k]}" for k in MODEL_KEYS]
  return {**summary, "model": model_cfg, "train_flags": flags_}
