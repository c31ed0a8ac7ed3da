"""The quickstart: a small corpus from every built-in environment, minutes on 2 CPU cores."""

import ml_collections


def get_config() -> ml_collections.ConfigDict:
  cfg = ml_collections.ConfigDict()
  cfg.corpus = ml_collections.ConfigDict()
  cfg.corpus.envs = "all"  # comma-separated names, or "all"
  cfg.corpus.episodes_per_env = 60
  cfg.corpus.seed = 0
  cfg.corpus.holdout_envs = ""  # comma-separated names
  cfg.corpus.tokenizer_vocab = 2048
  return cfg
