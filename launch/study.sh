#!/usr/bin/env bash
# The MDLM-vs-AR study end to end: corpus, AR S and AR 4x, three block MDLMs
# adapted from AR S (blocks of 8, of 4, the full canvas), the copy-s_t floor and
# the twin ceiling, evaluation, a steps-per-block sweep, reports. Rerunning resumes: training continues from its last checkpoint and
# finished evaluation reports are kept. Usage: bash launch/study.sh [OUT_DIR]
set -euo pipefail
OUT=${1:-/tmp/study}
D=$OUT/data
EXAMPLES=${EXAMPLES:-120}      # transitions scored per split
SWEEP_EXAMPLES=${SWEEP_EXAMPLES:-32}
MDLMS="mdlm_s mdlm_s_b4 mdlm_s_full"   # blocks of 8, of 4, the full canvas
MODELS="$MDLMS ar_s ar_4x"
AR_START=${AR_START:-$(python -c "from configs.study.common import AR_START_STEPS as s; print(s)")}
# A shrunk study (same shape, fewer episodes and steps): EPISODES=200 STEPS=300 AR_START=200.
EPISODES=${EPISODES:-1000}
STEPS=${STEPS:-700}

if [ ! -f "$D/stats.json" ]; then
  python -m launch.build_corpus --envs=all --episodes_per_env="$EPISODES" --seed=0 \
      --holdout_envs=calendar --tokenizer_vocab=4096 --out_dir="$D"
fi

evaluate() {  # evaluate REPORT [flags...]: skipped when REPORT exists
  local report=$1; shift
  [ -f "$report" ] || python -m launch.evaluate --out="$report" "$@"
}
train() {  # train MODEL STEPS [flags...]
  local m=$1 steps=$2; shift 2
  python -m launch.train --config=configs/study/$m.py --workdir="$OUT/$m" \
      --config.data.train="$D/train.jsonl" --config.data.valid="$D/valid.jsonl" \
      --config.data.tokenizer="$D/tokenizer.model" --config.train.steps="$steps" \
      --config.optim.warmup_steps=$((steps / 10)) "$@"  # 70 of 700 (AR), 20 of 200 (MDLM)
}
gcd() { local a=$1 b=$2; while [ "$b" -ne 0 ]; do local t=$b; b=$((a % b)); a=$t; done; echo "$a"; }
# AR S must keep a checkpoint at AR_START, where the MDLMs start.
train ar_s "$STEPS" --config.train.checkpoint_every="$(gcd 100 "$AR_START")"
# Each MDLM: AR S's step AR_START adapted for the rest of the same STEPS steps.
for m in $MDLMS; do
  train $m $((STEPS - AR_START)) --config.train.init_from="$OUT/ar_s" \
      --config.train.init_step="$AR_START"
done
train ar_4x "$STEPS"
# Split by split, so a run cut short has every model on the test split; the
# full-canvas MDLM is the slowest to sample (every step runs the whole canvas,
# nothing cached: ~44 s a transition in the 2026-12-07 shrunk run), so it
# comes last in each split.
for split in test heldout_env; do
  # The floor and the ceiling on the same transitions.
  evaluate "$OUT/copy.$split.json" --baseline=copy --data="$D/$split.jsonl" \
      --max_examples="$EXAMPLES"
  evaluate "$OUT/twin.$split.json" --baseline=twin --data="$D/$split.jsonl" \
      --max_examples="$EXAMPLES"
  for m in ar_s ar_4x $MDLMS; do  # the MDLMs last, the full canvas last of all
    evaluate "$OUT/$m.$split.json" --workdir="$OUT/$m" --data="$D/$split.jsonl" \
        --num_samples=4 --max_examples="$EXAMPLES" --max_rollouts=16 --max_steered=32 \
        --save_predictions="$OUT/$m.$split.predictions.jsonl"  # re-scorable when checks change
  done
done
for t in 2 4 8; do  # denoising steps per block of 8
  evaluate "$OUT/mdlm_s.steps$t.json" --workdir="$OUT/mdlm_s" --data="$D/test.jsonl" \
      --steps=$t --num_samples=4 --max_examples="$SWEEP_EXAMPLES" --max_rollouts=0 --max_steered=0
done

names=mdlm_s_b8,mdlm_s_b4,mdlm_s_full,ar_s,ar_4x,copy_st,twin
for split in test heldout_env; do
  r=""; for m in $MODELS copy twin; do r="$r,$OUT/$m.$split.json"; done
  python -m launch.report --names=$names --out="$OUT/report_$split" --reports="${r#,}"
done
python -m launch.report --names=S2,S4,S8 --out="$OUT/report_steps" \
    --reports="$OUT/mdlm_s.steps2.json,$OUT/mdlm_s.steps4.json,$OUT/mdlm_s.steps8.json"
echo "study done: reports in $OUT/report_*"
