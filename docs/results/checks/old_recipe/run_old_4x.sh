#!/bin/bash
# #25: the old-recipe AR 4x (commit 300aff8), shrunk as AR S and MDLM S were (300 steps).
set -e
cd /work/old
O=/work/runs/old; SD=/work/runs/study2/out/data
python -m launch.train --config=configs/study/ar_4x.py --workdir=$O/study/ar_4x \
  --config.data.train=$SD/train.jsonl --config.data.valid=$SD/valid.jsonl \
  --config.data.tokenizer=$SD/tokenizer.model --config.train.steps=300 --config.optim.warmup_steps=30
for split in test heldout_env; do
  [ -f $O/pred_study_ar_4x_$split.jsonl ] || python $O/predict_old.py $O/study/ar_4x $SD/$split.jsonl $O/pred_study_ar_4x_$split.jsonl 120
done
echo ALL DONE
