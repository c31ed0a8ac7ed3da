"""Study model: objective ar, size SIZE_4X (see common.py)."""

from configs.study.common import SIZE_4X, study_config


def get_config():
  return study_config("ar", SIZE_4X)
