"""World-model GRPO from a supervised checkpoint, reward = state checks.

  python -m launch.grpo --config=configs/grpo_wm.py --init=SFT_WORKDIR --workdir=DIR \
      --config.data.eval=CORPUS/test.jsonl,CORPUS/heldout_env.jsonl

Sized for the quickstart model on a 2-core CPU: 32 MDLM rollouts at 16
denoising steps took a median 17.5 s per step there (docs/results.md).
"""

from mdlm_wm.config import grpo_base_config


def get_config():
  return grpo_base_config()
