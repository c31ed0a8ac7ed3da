"""Study model: objective ar, size SIZE_S (see common.py)."""

from configs.study.common import SIZE_S, study_config


def get_config():
  return study_config("ar", SIZE_S)
