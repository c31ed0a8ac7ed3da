"""Study model: objective mdlm, size SIZE_S, blocks of 8, from AR S (see common.py)."""

from configs.study.common import SIZE_S, study_config


def get_config():
  return study_config("mdlm", SIZE_S, block_size=8)
