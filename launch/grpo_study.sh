#!/usr/bin/env bash
# World-model GRPO on the study's supervised S models (AR and MDLM, equal
# size): state-check reward on training transitions, evaluated before and
# after on the test split and the held-out environment, then compared
# transition by transition (launch.compare). Needs the study's checkpoints
# (bash launch/study.sh OUT_DIR). Rerunning resumes every stage.
# Usage: bash launch/grpo_study.sh [OUT_DIR]
set -euo pipefail

study() {
  local out=$1 d=$1/data
  # The study's MDLM S (700 steps) writes no state that passes every check,
  # not even greedily, so GRPO would have nothing to amplify: its training
  # continues first to 3x the steps (its checkpoints resumed on a 2100-step
  # schedule).
  if [ ! -d "$out/mdlm_s3x" ]; then
    mkdir -p "$out/mdlm_s3x"
    cp -r "$out/mdlm_s/checkpoints" "$out/mdlm_s/tokenizer.model" "$out/mdlm_s/metrics.jsonl" \
        "$out/mdlm_s3x/"
  fi
  python -m launch.train --config=configs/study/mdlm_s.py --workdir="$out/mdlm_s3x" \
      --config.data.train="$d/train.jsonl" --config.data.valid="$d/valid.jsonl" \
      --config.data.tokenizer="$d/tokenizer.model" --config.train.steps=2100 \
      --config.train.eval_every=350

  # model, GRPO steps, prompts per step (B), eval transitions per split: the
  # MDLM gets half the prompts and eval transitions of the AR (its rollouts
  # cost about 10x more on this CPU); both G = 8, lr 3e-4.
  local m steps b n
  while read -r m steps b n; do
    python -m launch.grpo --config=configs/grpo_wm.py --init="$out/$m" --workdir="$out/grpo2_$m" \
        --config.data.train="$d/train.jsonl" \
        --config.data.eval="$d/test.jsonl,$d/heldout_env.jsonl" \
        --config.grpo.num_prompts="$b" --config.grpo.num_generations=8 \
        --config.optim.lr=3e-4 --config.train.steps="$steps" \
        --config.train.eval_every="$steps" --config.train.eval_examples="$n"
    for split in test heldout_env; do
      python -m launch.compare --data="$d/$split.jsonl" \
          --before="$out/grpo2_$m/eval/$split.step0.predictions.jsonl" \
          --after="$out/grpo2_$m/eval/$split.step$steps.predictions.jsonl" \
          --out="$out/grpo2_$m/compare_$split.json"
    done
  done <<< "ar_s ${AR_STEPS:-80} 8 192
mdlm_s3x ${MDLM_STEPS:-40} 4 96"
  echo "GRPO study done: reports in $out/grpo2_*/eval/, paired changes in $out/grpo2_*/compare_*.json"
}

study "${1:-/tmp/study}"
