"""A behaviour-cloned text policy (agents/bc.py): the quickstart backbone, AR objective.

  python -m launch.train_agent --config=configs/agent_bc.py --data=CORPUS_DIR --workdir=AGENT_DIR

CORPUS_DIR is a corpus directory (launch.build_corpus): its expert episodes
become the policy's data and its tokenizer the policy's, so the agent and a
world model trained on the same corpus read the same tokens.
"""

import ml_collections

from configs import quickstart


def get_config():
  cfg = quickstart.get_config()
  cfg.objective = "ar"
  cfg.train.ar_start_steps = 0  # the quickstart's MDLM starts from its AR; a policy does not
  cfg.agent = ml_collections.ConfigDict()
  cfg.agent.policies = "expert"  # comma-separated corpus policies to clone
  cfg.agent.success_only = True  # only episodes that solved their task
  # One earlier (observation, action) pair besides the current observation
  # and the previous action, which every policy context holds.
  cfg.data.history_len = 1
  cfg.data.max_context_len = 320
  # An action is a command or one tool call: calendar's longest expert
  # calls are ~110 tokens at vocabulary 512, well under this at 2048.
  cfg.data.max_target_len = 96
  # AR rows hold the context and the action: dense packing.
  cfg.data.seq_len = 416
  # Greedy actions by default (launch.evaluate_agent --temperature overrides).
  cfg.sample.temperature = 0.0
  return cfg
