#!/usr/bin/env bash
# Evaluates the study's models split by split (test first for every model), so a
# cut-short session still has the test split; then study.sh writes the rest and the reports.
# Usage (from anywhere, beside a running `launch/study.sh OUT`): driver.sh OUT
cd "$(dirname "$0")/../../.."
OUT=${1:?usage: driver.sh OUT, the output folder of launch/study.sh}; D=$OUT/data; EX=48
while pgrep -f "configs/study/ar_4x.py" >/dev/null || [ ! -d $OUT/ar_4x ]; do sleep 10; done
pkill -f "launch/study.sh"; sleep 2; pkill -f "launch.evaluate"; sleep 2
ev() { local r=$1; shift; [ -f "$r" ] || GLIBC_TUNABLES=glibc.malloc.hugetlb=1 python -m launch.evaluate --out="$r" "$@"; }
for split in test heldout_env; do
  ev $OUT/copy.$split.json --baseline=copy --data=$D/$split.jsonl --max_examples=$EX
  ev $OUT/twin.$split.json --baseline=twin --data=$D/$split.jsonl --max_examples=$EX
  for m in ar_s mdlm_s_b4 mdlm_s ar_4x mdlm_s_full; do
    ev $OUT/$m.$split.json --workdir=$OUT/$m --data=$D/$split.jsonl --num_samples=4 \
       --max_examples=$EX --max_rollouts=16 --max_steered=32 \
       --save_predictions=$OUT/$m.$split.predictions.jsonl
  done
done
EPISODES=200 STEPS=300 AR_START=200 EXAMPLES=48 SWEEP_EXAMPLES=16 GLIBC_TUNABLES=glibc.malloc.hugetlb=1 bash launch/study.sh $OUT
echo driver done
