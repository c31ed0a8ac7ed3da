r"""Imports a local Llama / Qwen2 / Qwen3 checkpoint (HF layout) as a world-model workdir.

  python -m launch.import_hf --hf_dir=/models/Qwen3-0.6B --out=/tmp/qwen3_import \
      --tokenizer=/tmp/corpus/tokenizer.model --embeddings=match --objective=mdlm \
      [--config=configs/base_1b.py]

then fine-tune in a NEW workdir, starting from the imported params:

  python -m launch.train --config=configs/base_1b.py --workdir=/tmp/wm \
      --config.train.init_from=/tmp/qwen3_import <the --config.model.* flags printed here> \
      --config.data.tokenizer=/tmp/qwen3_import/tokenizer.model --config.data.train=...

The workdir holds a step-0 checkpoint (params, fresh optimizer state), the
project tokenizer and the config (its model section set from the HF
config.json), so `WorldModel.load` opens it as well. The project pipeline
needs its own tokenizer (reserved pad / mask / marker ids), so the HF
embedding is replaced explicitly (`--embeddings`, see model/hf_import.py).
"""

from __future__ import annotations

import dataclasses
import os

import jax
from absl import app, flags
from ml_collections import config_flags

from mdlm_wm import config as config_lib
from mdlm_wm.data.tokenizer import Tokenizer
from mdlm_wm.model import hf_import, sharding
from mdlm_wm.train import trainer
from mdlm_wm.train.checkpoint import Checkpointer

FLAGS = flags.FLAGS
_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "Training config the workdir records (default: mdlm_wm.config.base_config); "
    "its model section is replaced by the checkpoint's.")
flags.DEFINE_string("hf_dir", None, "Local HF checkpoint: config.json + safetensors.",
                    required=True)
flags.DEFINE_string("out", None, "Workdir to write.", required=True)
flags.DEFINE_string("tokenizer", None, "The project tokenizer.model (build_corpus writes one).",
                    required=True)
flags.DEFINE_enum("embeddings", None, hf_import.EMBEDDING_MODES,
                  "How the project vocabulary gets its embedding rows.", required=True)
flags.DEFINE_enum("objective", "mdlm", ["mdlm", "ar"], "The objective fine-tuning will use.")

# config.model keys set from the checkpoint (ModelConfig field names).
MODEL_KEYS = ("d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff", "d_head", "rope_base",
              "norm_eps", "qkv_bias", "qk_norm", "tie_embeddings")


def import_to_workdir(hf_dir: str, out: str, cfg, tokenizer: Tokenizer, embeddings: str) -> dict:
  """Writes the workdir; returns a summary (model config, rows copied, override flags)."""
  cfg = cfg.copy_and_resolve_references()
  hf = hf_import.read_config(hf_dir)
  probe = hf_import.model_config_from_hf(hf)
  with cfg.unlocked():
    for key in MODEL_KEYS:
      cfg.model[key] = getattr(probe, key)
    cfg.data.tokenizer = os.path.join(os.path.abspath(out), trainer.TOKENIZER_FILE)
    cfg.corpus.tokenizer_vocab = tokenizer.vocab_size
  config_lib.validate(cfg)
  devices = jax.devices()[:cfg.mesh.num_devices] if cfg.mesh.num_devices else None
  mesh = sharding.make_mesh(cfg.mesh.shape, devices)
  m = cfg.model
  model_cfg, _, params = hf_import.import_hf(
      hf_dir, mesh=mesh, rules=cfg.mesh.rules, attention=config_lib.attention_mode(cfg),
      dtype=m.dtype, remat=m.remat)
  model_cfg, params, copied = hf_import.adapt_vocab(model_cfg, params, tokenizer, embeddings,
                                                    hf_dir=hf_dir, seed=cfg.seed)
  # The recorded config must rebuild exactly this model (WorldModel.load, init_from).
  assert config_lib.model_config(cfg, tokenizer.vocab_size) == model_cfg
  tx, _ = trainer.make_optimizer(cfg)
  with jax.set_mesh(mesh):
    state = trainer.init_train_state(params, tx)
  os.makedirs(out, exist_ok=True)
  tokenizer.save(cfg.data.tokenizer)
  summary = {"hf_dir": os.path.abspath(hf_dir), "model_type": hf["model_type"],
             "embeddings": embeddings, "rows_copied": copied}
  meta = {"config": cfg.to_dict(), "model": dataclasses.asdict(model_cfg),
          "tokenizer": trainer.TOKENIZER_FILE, "seed": cfg.seed, "hf_import": summary}
  ckpt = Checkpointer(os.path.join(out, trainer.CHECKPOINT_DIR), save_every=1, keep=1)
  ckpt.save(0, state, None, meta, force=True)
  ckpt.close()
  flags_ = [f"--config.model.{k}={cfg.model[k]}" for k in MODEL_KEYS]
  return {**summary, "model": model_cfg, "train_flags": flags_}


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  cfg = _CONFIG.value if _CONFIG.value is not None else config_lib.base_config()
  cfg.objective = FLAGS.objective
  try:
    r = import_to_workdir(FLAGS.hf_dir, FLAGS.out, cfg, Tokenizer.load(FLAGS.tokenizer),
                          FLAGS.embeddings)
  except ValueError as e:
    raise app.UsageError(str(e)) from None
  model_cfg = r["model"]
  print(f"imported {r['model_type']} from {r['hf_dir']}: {model_cfg.num_params():,} params, "
        f"vocab {model_cfg.vocab_size} ({r['embeddings']}: {r['rows_copied']} rows copied from "
        f"the HF embedding) -> {FLAGS.out}")
  print("fine-tune in a new workdir with:\n  python -m launch.train --config=CONFIG "
        f"--workdir=NEW --config.objective={FLAGS.objective} --config.train.init_from={FLAGS.out} "
        f"--config.data.tokenizer={os.path.join(FLAGS.out, trainer.TOKENIZER_FILE)} "
        + " ".join(r["train_flags"]))


if __name__ == "__main__":
  app.run(main)
