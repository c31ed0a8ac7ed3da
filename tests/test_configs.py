"""Every shipped config validates, and the study's sizes are what its docs say."""

import importlib
import pkgutil

import pytest

import configs
from mdlm_wm import config as config_lib

NAMES = sorted(m.name for m in pkgutil.walk_packages(configs.__path__, "configs.")
               if not m.ispkg and not m.name.endswith(".common"))


@pytest.mark.parametrize("name", NAMES)
def test_config_validates(name):
  cfg = importlib.import_module(name).get_config()
  if "env_backend" in cfg:  # agent GRPO: its workdirs and env come from flags
    cfg.agent, cfg.world_model, cfg.env = "AGENT_DIR", "WM_DIR", "household"
    config_lib.validate_agent_grpo(cfg)
  else:
    (config_lib.validate_grpo if "grpo" in cfg else config_lib.validate)(cfg)


def test_study_sizes():
  size = lambda n: config_lib.model_config(
      importlib.import_module(f"configs.study.{n}").get_config(), 4096).num_params()
  assert size("mdlm_s") == size("ar_s")
  assert 3.5 <= size("ar_4x") / size("ar_s") <= 4.5
  base = importlib.import_module("configs.base_1b").get_config()
  assert 0.9e9 < config_lib.model_config(base, 32000).num_params() < 1.1e9
