#!/usr/bin/env bash
# World-model GRPO on the study's supervised S models (MDLM and AR, equal
# size): state-check reward on training transitions, evaluated before and
# after on the test split and the held-out environment. Needs the study's
# checkpoints (bash launch/study.sh OUT_DIR). Rerunning resumes.
# Usage: bash launch/grpo_study.sh [OUT_DIR]
set -euo pipefail
OUT=${1:-/tmp/study}
D=$OUT/data
STEPS=${STEPS:-40}
for m in ar_s mdlm_s; do
  python -m launch.grpo --config=configs/grpo_wm.py --init="$OUT/$m" --workdir="$OUT/grpo_$m" \
      --config.data.train="$D/train.jsonl" \
      --config.data.eval="$D/test.jsonl,$D/heldout_env.jsonl" \
      --config.train.steps="$STEPS" --config.train.eval_every="$STEPS"
done
echo "GRPO study done: before/after reports in $OUT/grpo_*/eval/"
