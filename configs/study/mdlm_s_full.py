"""Study model: objective mdlm, size SIZE_S, the full canvas, from AR S (see common.py)."""

from configs.study.common import SIZE_S, study_config


def get_config():
  return study_config("mdlm", SIZE_S, block_size=0)
