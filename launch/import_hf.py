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

import os

from absl import app, flags
from ml_collections import config_flags

from mdlm_wm import config as config_lib
from mdlm_wm.data.tokenizer import Tokenizer
from mdlm_wm.model import hf_import
from mdlm_wm.train import hf_workdir
from mdlm_wm.train import state as train_state
from mdlm_wm.utils import errors

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

def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  cfg = _CONFIG.value if _CONFIG.value is not None else config_lib.base_config()
  cfg.objective = FLAGS.objective
  with errors.reported():
    r = hf_workdir.import_to_workdir(FLAGS.hf_dir, FLAGS.out, cfg,
                                    Tokenizer.load(FLAGS.tokenizer), FLAGS.embeddings)
  model_cfg = r["model"]
  print(f"imported {r['model_type']} from {r['hf_dir']}: {model_cfg.num_params():,} params, "
        f"vocab {model_cfg.vocab_size} ({r['embeddings']}: {r['rows_copied']} rows copied from "
        f"the HF embedding) -> {FLAGS.out}")
  print("fine-tune in a new workdir with:\n  python -m launch.train --config=CONFIG "
        f"--workdir=NEW --config.objective={FLAGS.objective} --config.train.init_from={FLAGS.out} "
        f"--config.data.tokenizer={os.path.join(FLAGS.out, train_state.TOKENIZER_FILE)} "
        + " ".join(r["train_flags"]))


if __name__ == "__main__":
  app.run(main, flags_parser=errors.parse_flags)
