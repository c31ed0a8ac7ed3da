"""Agent fixtures: a tiny behaviour-cloned policy, trained once per session."""

import ml_collections
import pytest

from tests.conftest import tiny_config

BC_STEPS = 12


def agent_config(corpus_dir: str, **overrides):
  """configs/tiny.py as an agent config (configs/agent_bc.py's changes)."""
  cfg = tiny_config(corpus_dir, objective="ar", **overrides)
  cfg.agent = ml_collections.ConfigDict({"policies": "expert", "success_only": True})
  cfg.data.history_len = 1
  cfg.data.max_target_len = 64  # half the decoding of the tiny world model's canvas
  cfg.optim.lr = 1e-2  # so that a 12-step run learns measurably
  return cfg


@pytest.fixture(scope="session")
def tiny_agent(tiny_corpus, tmp_path_factory) -> str:
  """The workdir of a tiny BC agent trained for BC_STEPS steps on the tiny corpus."""
  from mdlm_wm.agents import bc
  workdir = str(tmp_path_factory.mktemp("tiny_agent"))
  bc.train_bc(agent_config(tiny_corpus, **{"train.steps": BC_STEPS}), tiny_corpus, workdir)
  return workdir
