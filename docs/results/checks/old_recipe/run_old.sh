#!/bin/bash
# #25: old-recipe (commit 300aff8) models predict on new-code corpora; main scores them.
set -e
while pgrep -f "launch.quickstart --workdir=/work/runs/old/qs" > /dev/null; do sleep 15; done
cd /work/old
O=/work/runs/old; SD=/work/runs/study2/out/data
for m in ar mdlm; do
  [ -f $O/pred_qs_$m.jsonl ] || python $O/predict_old.py $O/qs/$m $O/newdata/test.jsonl $O/pred_qs_$m.jsonl
done
for m in ar_s mdlm_s; do
  python -m launch.train --config=configs/study/$m.py --workdir=$O/study/$m \
    --config.data.train=$SD/train.jsonl --config.data.valid=$SD/valid.jsonl \
    --config.data.tokenizer=$SD/tokenizer.model --config.train.steps=300 --config.optim.warmup_steps=30
done
for m in ar_s mdlm_s; do
  for split in test heldout_env; do
    [ -f $O/pred_study_${m}_$split.jsonl ] || python $O/predict_old.py $O/study/$m $SD/$split.jsonl $O/pred_study_${m}_$split.jsonl 120
  done
done
echo ALL DONE
