#!/usr/bin/env bash
# A second GRPO seed (config.seed=1) of the GRPO arms of a finished transfer study, each
# evaluated on the same real test games. Usage: bash seed1.sh STUDY_DIR
set -euo pipefail
OUT=${1:?the transfer study directory}
# ENVS and EVAL_EPISODES (environment) as given to that study.
ENVS=${ENVS:-textworld_express/coin,textworld/coin_collector}
EVAL_EPISODES=${EVAL_EPISODES:-30}
G=(--config=configs/agent_grpo.py --agent="$OUT/agent_bc" --env="$ENVS" --config.train.steps=10
   --config.grpo.horizon=10 --config.tasks.per_env=80 --config.train.eval_episodes=0 --config.seed=1)
for arm in ar mdlm real; do
  w=$OUT/agent_grpo_${arm}_seed1
  if [ ! -f "$w/done" ]; then
    if [ $arm = real ]; then extra=(--env_backend=real); else extra=(--world_model="$OUT/wm_$arm"); fi
    python -m launch.agent_grpo "${G[@]}" "${extra[@]}" --workdir="$w" > "$OUT/logs/grpo_${arm}_seed1.log" 2>&1 && touch "$w/done"
  fi
  [ -f "$OUT/eval/grpo_${arm}_seed1.json" ] || python -m launch.evaluate_agent --agent="$w" --env="$ENVS" \
      --tasks=test --episodes="$EVAL_EPISODES" --max_steps=10 --out="$OUT/eval/grpo_${arm}_seed1.json" > "$OUT/logs/eval_grpo_${arm}_seed1.log" 2>&1
  echo "$arm seed 1 done"
done
