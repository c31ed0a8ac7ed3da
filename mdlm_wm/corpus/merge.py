"""Merges corpus directories into one corpus: e.g. the built-in corpus and a
real-environment corpus, for a world model trained on both.

Each split file (train / valid / test / heldout_env.jsonl) of the merged
corpus is the concatenation of the parts' files of that split, in the order
the parts are given; one tokenizer is trained on the merged train split (the
parts' own tokenizers, if any, are not used: each covers only its own text).
The parts stay where they are, with their own stats.json (their splits and
seeds); the merged stats.json names them and holds per-split statistics of
the merged files. Reading the merged files back validates every line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from mdlm_wm import corpus
from mdlm_wm.data.schema import SchemaError

SPLIT_FILES = (*corpus.SPLITS, corpus.HELDOUT)


def merge_corpora(parts: Mapping[str, str], out_dir: str, *, tokenizer_vocab: int) -> dict:
  """Writes the merged split files, tokenizer and stats.json into `out_dir`.

  `parts` maps a name (recorded in stats.json) to a corpus directory. An
  episode id found in two parts raises SchemaError (file, line, id): ids key
  evaluation reports and must stay unique.
  """
  if not parts:
    raise ValueError("no corpus to merge")
  os.makedirs(out_dir, exist_ok=True)
  seen: dict[str, str] = {}
  written = []
  for split in SPLIT_FILES:
    sources = [(name, os.path.join(d, f"{split}.jsonl")) for name, d in parts.items()]
    sources = [(name, path) for name, path in sources if os.path.exists(path)]
    target = os.path.join(out_dir, f"{split}.jsonl")
    if not sources:
      continue
    with open(target + ".tmp", "w", encoding="utf-8") as out:
      for _, path in sources:
        with open(path, encoding="utf-8") as f:
          for lineno, line in enumerate(f, 1):
            if not line.strip():
              continue
            where = f"{path}:{lineno}"
            try:
              episode_id = json.loads(line)["id"]
            except (ValueError, KeyError, TypeError) as e:
              raise SchemaError([f"{where}: not an episode with an 'id' ({e})"]) from None
            if episode_id in seen:
              raise SchemaError([f"{where}: episode id {episode_id!r} is also at "
                                 f"{seen[episode_id]}"])
            seen[episode_id] = where
            out.write(line if line.endswith("\n") else line + "\n")
    os.replace(target + ".tmp", target)
    written.append(split)
  corpus.remove_stale(out_dir, written, tokenizer_vocab)
  if tokenizer_vocab and "train" not in written:
    raise ValueError("no part has a train.jsonl to train the tokenizer on")
  tokenizer = corpus.train_split_tokenizer(out_dir, tokenizer_vocab)
  env_stats = corpus.split_stats(out_dir, written, tokenizer)
  result = {
      "parts": {name: os.path.relpath(d, out_dir) for name, d in parts.items()},
      "stats": {split: {env: s.summary(tokenizer is not None) for env, s in sorted(st.items())}
                for split, st in env_stats.items()},
      "tokenizer": ({"file": corpus.TOKENIZER_FILE, "vocab_size": tokenizer.vocab_size}
                    if tokenizer else None),
  }
  corpus.write_json(os.path.join(out_dir, "stats.json"), result)
  result["env_stats"] = env_stats
  return result
