#!/usr/bin/env bash
# The held-out split, beside the full-canvas MDLM's test evaluation.
# Usage: driver2.sh OUT (launch/study.sh's output folder)
cd "$(dirname "$0")/../../.."
OUT=${1:?usage: driver2.sh OUT, the output folder of launch/study.sh}; D=$OUT/data; EX=48
ev() { local r=$1; shift; [ -f "$r" ] || GLIBC_TUNABLES=glibc.malloc.hugetlb=1 python -m launch.evaluate --out="$r" "$@"; }
split=heldout_env
ev $OUT/copy.$split.json --baseline=copy --data=$D/$split.jsonl --max_examples=$EX
ev $OUT/twin.$split.json --baseline=twin --data=$D/$split.jsonl --max_examples=$EX
for m in ar_s mdlm_s_b4 mdlm_s ar_4x; do
  ev $OUT/$m.$split.json --workdir=$OUT/$m --data=$D/$split.jsonl --num_samples=4 \
     --max_examples=$EX --max_rollouts=16 --max_steered=32 \
     --save_predictions=$OUT/$m.$split.predictions.jsonl
done
echo driver2 done
