#!/usr/bin/env bash
# The MDLM-vs-AR study end to end: corpus, three models, evaluation, T sweep,
# report. Rerunning resumes: training continues from its last checkpoint and
# finished evaluation reports are kept. Usage: bash launch/study.sh [OUT_DIR]
set -euo pipefail
OUT=${1:-/tmp/study}
D=$OUT/data
EXAMPLES=${EXAMPLES:-120}      # transitions scored per split
SWEEP_EXAMPLES=${SWEEP_EXAMPLES:-32}
MODELS="mdlm_s ar_s ar_4x"

if [ ! -f "$D/stats.json" ]; then
  python -m launch.build_corpus --envs=all --episodes_per_env=1000 --seed=0 \
      --holdout_envs=calendar --tokenizer_vocab=4096 --out_dir="$D"
fi

for m in $MODELS; do
  python -m launch.train --config=configs/study/$m.py --workdir="$OUT/$m" \
      --config.data.train="$D/train.jsonl" --config.data.valid="$D/valid.jsonl" \
      --config.data.tokenizer="$D/tokenizer.model"
done

evaluate() {  # evaluate REPORT [flags...]: skipped when REPORT exists
  local report=$1; shift
  [ -f "$report" ] || python -m launch.evaluate --out="$report" "$@"
}
for m in $MODELS; do
  for split in test heldout_env; do
    evaluate "$OUT/$m.$split.json" --workdir="$OUT/$m" --data="$D/$split.jsonl" \
        --num_samples=4 --max_examples="$EXAMPLES" --max_rollouts=16 --max_steered=32
  done
done
for t in 8 16 32 64; do
  evaluate "$OUT/mdlm_s.steps$t.json" --workdir="$OUT/mdlm_s" --data="$D/test.jsonl" \
      --steps=$t --num_samples=4 --max_examples="$SWEEP_EXAMPLES" --max_rollouts=0 --max_steered=0
done

names=mdlm_s,ar_s,ar_4x
for split in test heldout_env; do
  python -m launch.report --names=$names --out="$OUT/report_$split" \
      --reports="$OUT/mdlm_s.$split.json,$OUT/ar_s.$split.json,$OUT/ar_4x.$split.json"
done
python -m launch.report --names=T8,T16,T32,T64 --out="$OUT/report_steps" \
    --reports="$OUT/mdlm_s.steps8.json,$OUT/mdlm_s.steps16.json,$OUT/mdlm_s.steps32.json,$OUT/mdlm_s.steps64.json"
echo "study done: reports in $OUT/report_*"
