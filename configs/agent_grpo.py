"""Agent GRPO (agents/grpo.py): a BC agent acts in a world model from real starts.

  python -m launch.agent_grpo --config=configs/agent_grpo.py --agent=AGENT_DIR \
      --world_model=WM_DIR --env=household --workdir=OUT [--env_backend=real]

Sized for quickstart models on a 2-core CPU: B x G = 4 x 4 episodes of up to
10 steps, each step one batched agent call and one batched world-model call.
"""

from mdlm_wm.config import agent_grpo_base_config


def get_config():
  cfg = agent_grpo_base_config()
  cfg.train.eval_episodes = 16  # per environment, in the real environment
  return cfg
