#!/usr/bin/env bash
# World-model GRPO from supervised AR and MDLM world models of one backbone:
# state-check reward on training transitions, evaluated before and after on
# held-out transitions, then compared transition by transition
# (launch.compare). Rerunning resumes every stage.
#
# Usage:
#   bash launch/grpo_study.sh quickstart [OUT_DIR]
#       the quickstart's models (runs launch.quickstart into OUT_DIR/run
#       first); the MDLM is the quickstart config trained 3000 steps, then
#       9000 and 18000, since the 450-step quickstart MDLM writes no state
#       that passes.
#   bash launch/grpo_study.sh study [STUDY_DIR]
#       the study's S models (needs bash launch/study.sh STUDY_DIR first).
#   bash launch/grpo_study.sh block QS_WORKDIR [OUT_DIR]
#       the quickstart's block MDLM (from its AR's start) and its AR, as
#       launch.quickstart left them in QS_WORKDIR.
set -euo pipefail

# paired DATA BEFORE AFTER OUT: launch.compare of two prediction files of the
# same transitions.
paired() {
  python -m launch.compare --data="$1" --before="$2" --after="$3" --out="$4"
}

# grpo_compare INIT OUT DATA_DIR SPLITS STEPS PROMPTS LR EVAL_EVERY EVAL_N [FLAG...]
# GRPO with G = 8 from INIT into OUT (extra FLAGs go to launch.grpo), then one
# paired comparison of step 0 against the last step per comma-separated eval
# split. With BEFORE=DIR, step 0 is DIR's evaluation of the same INIT (a run
# with the same eval settings) and OUT skips its own.
grpo_compare() {
  local init=$1 out=$2 d=$3 splits=$4 steps=$5 prompts=$6 lr=$7 every=$8 n=$9
  shift 9
  local before=$out
  if [ -n "${BEFORE:-}" ]; then before=$BEFORE; set -- "$@" --config.train.eval_at_start=false; fi
  local split split_names evals=()
  IFS=, read -ra split_names <<< "$splits"
  for split in "${split_names[@]}"; do evals+=("$d/$split.jsonl"); done
  python -m launch.grpo --config=configs/grpo_wm.py --init="$init" --workdir="$out" \
      --config.data.train="$d/train.jsonl" \
      --config.data.eval="$(IFS=,; echo "${evals[*]}")" \
      --config.grpo.num_prompts="$prompts" --config.grpo.num_generations=8 \
      --config.optim.lr="$lr" --config.train.steps="$steps" \
      --config.train.eval_every="$every" --config.train.eval_examples="$n" "$@"
  for split in "${split_names[@]}"; do
    paired "$d/$split.jsonl" "$before/eval/$split.step0.predictions.jsonl" \
        "$out/eval/$split.step$steps.predictions.jsonl" "$out/compare_$split.json"
  done
}

# greedy WORKDIR OUT DATA_DIR [FLAG...]: one greedy (T = 0) sample for every
# test transition; OUT.json and OUT.predictions.jsonl. FLAGs are sampler
# flags of launch.evaluate.
greedy() {
  local wd=$1 o=$2 d=$3
  shift 3
  python -m launch.evaluate --workdir="$wd" --data="$d/test.jsonl" \
      --num_samples=1 --temperature=0 --max_rollouts=0 --max_steered=0 "$@" \
      --out="$o.json" --save_predictions="$o.predictions.jsonl"
}

# extend SRC DST STEPS EVAL_EVERY CONFIG DATA_DIR [FLAG...]: DST continues SRC's
# training to STEPS, SRC's checkpoints resumed on a STEPS-long cosine schedule
# (so the learning rate rises again); SRC is left as it was.
extend() {
  local src=$1 dst=$2 steps=$3 every=$4 config=$5 d=$6
  shift 6
  if [ ! -d "$dst" ]; then
    mkdir -p "$dst"
    cp -r "$src/checkpoints" "$src/tokenizer.model" "$src/metrics.jsonl" "$dst/"
  fi
  python -m launch.train --config="$config" --workdir="$dst" \
      --config.data.train="$d/train.jsonl" --config.data.valid="$d/valid.jsonl" \
      --config.data.tokenizer="$d/tokenizer.model" --config.train.steps="$steps" \
      --config.train.eval_every="$every" "$@"
}

quickstart() {
  local out=$1 d=$1/run/data
  python -m launch.quickstart --workdir="$out/run"
  python -m launch.train --config=configs/quickstart.py --workdir="$out/mdlm_3k" \
      --config.objective=mdlm --config.data.train="$d/train.jsonl" \
      --config.data.valid="$d/valid.jsonl" --config.data.tokenizer="$d/tokenizer.model" \
      --config.train.steps=3000 --config.train.eval_every=1000 \
      --config.train.checkpoint_every=250
  # The quickstart holds no held-out environment: test transitions only.
  local ar_steps=${AR_STEPS:-200} t
  grpo_compare "$out/run/ar" "$out/grpo_ar" "$d" test "$ar_steps" 8 2e-4 100 200
  # The same for 100 steps with KL weight 0.1 instead of 0.02: how much of
  # the loss of diversity a stronger pull to the start prevents.
  BEFORE="$out/grpo_ar" grpo_compare "$out/run/ar" "$out/grpo_ar_beta0.1" "$d" test 100 8 2e-4 100 200 \
      --config.grpo.beta=0.1
  paired "$d/test.jsonl" "$out/grpo_ar/eval/test.step100.predictions.jsonl" \
      "$out/grpo_ar_beta0.1/eval/test.step100.predictions.jsonl" \
      "$out/grpo_ar_beta0.1/compare_vs_beta0.02_step100.json"
  # Control: does GRPO do more than a cooler sampling temperature would? The
  # supervised AR at T = 0.5 and 0.7 on the same transitions, paired with
  # GRPO's samples (which are drawn at T = 1).
  for t in 0.5 0.7; do
    python -m launch.evaluate --workdir="$out/run/ar" --data="$d/test.jsonl" --max_examples=200 \
        --num_samples=4 --temperature="$t" --max_rollouts=0 --max_steered=0 \
        --out="$out/grpo_ar/sft_T$t.json" --save_predictions="$out/grpo_ar/sft_T$t.predictions.jsonl"
    paired "$d/test.jsonl" "$out/grpo_ar/sft_T$t.predictions.jsonl" \
        "$out/grpo_ar/eval/test.step$ar_steps.predictions.jsonl" \
        "$out/grpo_ar/compare_sft_T${t}_vs_grpo.json"
  done
  # The MDLM gets half the prompts and eval transitions of the AR: its
  # rollouts cost several times more on a CPU.
  grpo_compare "$out/mdlm_3k" "$out/grpo_mdlm" "$d" test "${MDLM_STEPS:-50}" 4 2e-4 \
      "${MDLM_STEPS:-50}" 100
  # Again with 64 denoising steps for rollouts and evaluation instead of 16:
  # the MDLM's states are far more coherent (env check 0.22 vs 0.12 at step 0).
  grpo_compare "$out/mdlm_3k" "$out/grpo_mdlm_s64" "$d" test "${MDLM_STEPS:-50}" 4 2e-4 \
      "${MDLM_STEPS:-50}" 100 --config.sample.steps=64
  # Neither MDLM run above starts from a model that passes any test transition
  # (0 of 400 samples), so there is nothing for GRPO to amplify: the 3000-step
  # MDLM trains 6000 steps further, then GRPO at 64 denoising steps with twice
  # the eval transitions, to resolve a small pass rate (evaluated before and
  # after only: each evaluation of 800 samples costs 8-14 minutes on 2 CPU cores).
  extend "$out/mdlm_3k" "$out/mdlm_9k" 9000 1500 configs/quickstart.py "$d" \
      --config.objective=mdlm --config.train.checkpoint_every=250
  grpo_compare "$out/mdlm_9k" "$out/grpo_mdlm9k_s64" "$d" test "${MDLM9K_STEPS:-60}" 4 2e-4 \
      "${MDLM9K_STEPS:-60}" 200 --config.sample.steps=64
  # The 9000-step MDLM passes none of 800 samples either: 9000 steps more
  # (its checkpoints resumed on an 18000-step schedule), then the same GRPO.
  extend "$out/mdlm_9k" "$out/mdlm_18k" 18000 1500 configs/quickstart.py "$d" \
      --config.objective=mdlm --config.train.checkpoint_every=250
  grpo_compare "$out/mdlm_18k" "$out/grpo_mdlm18k_s64" "$d" test "${MDLM18K_STEPS:-40}" 4 2e-4 \
      "${MDLM18K_STEPS:-40}" 200 --config.sample.steps=64
  # Sampled at T = 1 the MDLM never passes; decoded greedily in blocks of 8
  # (128 steps: one token per step, left to right by block) it passes as
  # often as the AR does greedily. GRPO with rollouts in those blocks (at
  # T = 1), and greedy evaluations of one sample per transition before and
  # after (the GRPO loop evaluates at its rollout temperature, which must be
  # > 0, so launch.evaluate does these).
  local b8=(--steps=128 --block_size=8)
  python -m launch.grpo --config=configs/grpo_wm.py --init="$out/mdlm_18k" \
      --workdir="$out/grpo_mdlm18k_b8" --config.data.train="$d/train.jsonl" \
      --config.grpo.num_prompts=4 --config.grpo.num_generations=8 --config.optim.lr=2e-4 \
      --config.train.steps="${MDLM18K_STEPS:-40}" --config.train.checkpoint_every=10 \
      --config.sample.steps=128 --config.sample.block_size=8
  greedy "$out/mdlm_18k" "$out/grpo_mdlm18k_b8/greedy_sft" "$d" "${b8[@]}"
  greedy "$out/grpo_mdlm18k_b8" "$out/grpo_mdlm18k_b8/greedy_grpo" "$d" "${b8[@]}"
  greedy "$out/run/ar" "$out/grpo_mdlm18k_b8/greedy_ar_sft" "$d"
  paired "$d/test.jsonl" "$out/grpo_mdlm18k_b8/greedy_sft.predictions.jsonl" \
      "$out/grpo_mdlm18k_b8/greedy_grpo.predictions.jsonl" "$out/grpo_mdlm18k_b8/compare_greedy.json"
  echo "GRPO from the quickstart done: reports in $out/grpo_*/eval/, paired changes in $out/grpo_*/compare_*.json"
}

study() {
  local out=$1 d=$1/data
  # The study's MDLM S (700 steps) writes no state that passes every check,
  # not even greedily, so GRPO would have nothing to amplify: its training
  # continues first to 3x the steps (its checkpoints resumed on a 2100-step
  # schedule).
  extend "$out/mdlm_s" "$out/mdlm_s3x" 2100 350 configs/study/mdlm_s.py "$d"
  grpo_compare "$out/ar_s" "$out/grpo2_ar_s" "$d" test,heldout_env "${AR_STEPS:-80}" 8 3e-4 \
      "${AR_STEPS:-80}" 192
  grpo_compare "$out/mdlm_s3x" "$out/grpo2_mdlm_s3x" "$d" test,heldout_env "${MDLM_STEPS:-40}" \
      4 3e-4 "${MDLM_STEPS:-40}" 96
  echo "GRPO study done: reports in $out/grpo2_*/eval/, paired changes in $out/grpo2_*/compare_*.json"
}

# block QS_WORKDIR OUT: GRPO from the quickstart's current models (the block
# MDLM adapted from the AR's step 300, and the AR), same B x G, steps and
# rate for both; evaluated at the rollout temperature inside the loop and
# greedily before and after, each paired transition by transition.
block() {
  local qs=$1 out=$2 d=$1/data steps=${STEPS:-40} n=${EVAL_N:-200} m
  local block_steps
  block_steps=$(python -c "from configs.quickstart import get_config; print(get_config().sample.steps)")
  for m in ar mdlm; do
    local flags=(--config.optim.warmup_steps=$((steps > 10 ? 5 : 0)))
    [ $m = mdlm ] && flags+=(--config.sample.steps="$block_steps")
    # REWARD=passed: evaluation's pass (0/1) as the only reward.
    [ "${REWARD:-state_check}" = passed ] && flags+=(--config.rewards.state_check=0 \
        --config.rewards.passed=1)
    grpo_compare "$qs/$m" "$out/grpo_$m" "$d" test "$steps" 8 2e-4 "$steps" "$n" "${flags[@]}"
    greedy "$qs/$m" "$out/grpo_$m/greedy_sft" "$d" --max_examples="$n"
    greedy "$out/grpo_$m" "$out/grpo_$m/greedy_grpo" "$d" --max_examples="$n"
    paired "$d/test.jsonl" "$out/grpo_$m/greedy_sft.predictions.jsonl" \
        "$out/grpo_$m/greedy_grpo.predictions.jsonl" "$out/grpo_$m/compare_greedy.json"
  done
  echo "GRPO from the quickstart's block MDLM and AR done: paired changes in $out/grpo_*/compare_*.json"
}

case "${1:-}" in
  quickstart) quickstart "${2:-/tmp/mdlm_wm_grpo_quickstart}" ;;
  study) study "${2:-/tmp/study}" ;;
  block) block "${2:?the quickstart workdir}" "${3:-/tmp/mdlm_wm_grpo_block}" ;;
  *) echo "usage: bash launch/grpo_study.sh {quickstart|study} [OUT_DIR] | block QS_WORKDIR [OUT_DIR]" >&2
     exit 2 ;;
esac
