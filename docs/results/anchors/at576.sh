#!/usr/bin/env bash
# Anchor study at the study configs' 576-token contexts (anchors whole in
# 98.8% of training examples): AR S and MDLM S (blocks of 8, from AR S) trained
# on an existing study corpus, then (1) the evaluation-time ablation
# (ablation.sh) and (2) the training-time ablation: both models retrained
# with rules hidden (--config.data.ablate=rules, the anchor whose removal moved
# the 384-token models most) and scored on the same transitions with paired
# intervals against the all-anchor models. Resumes when rerun.
# Usage: STEPS=300 AR_START=200 EXAMPLES=60 bash docs/results/anchors/at576.sh CORPUS_DIR OUT
set -euo pipefail
CORPUS=$1; OUT=$2; STEPS=${STEPS:-700}; AR_START=${AR_START:-500}; N=${EXAMPLES:-120}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"; [ -e "$OUT/data" ] || ln -s "$(cd "$CORPUS" && pwd)" "$OUT/data"
D=$OUT/data
train() {  # train CONFIG WORKDIR STEPS [flags...]
  local c=$1 w=$2 steps=$3; shift 3
  python -m launch.train --config=configs/study/$c.py --workdir="$w" \
      --config.data.train="$D/train.jsonl" --config.data.valid="$D/valid.jsonl" \
      --config.data.tokenizer="$D/tokenizer.model" --config.train.steps="$steps" \
      --config.optim.warmup_steps=$((steps / 10)) --config.train.checkpoint_every=100 "$@"
}
for hidden in "" rules; do
  sfx=${hidden:+_no_$hidden}; flag=${hidden:+--config.data.ablate=$hidden}
  train ar_s "$OUT/ar_s$sfx" "$STEPS" $flag
  train mdlm_s "$OUT/mdlm_s$sfx" $((STEPS - AR_START)) --config.train.init_from="$OUT/ar_s$sfx" \
      --config.train.init_step="$AR_START" $flag
done
EXAMPLES=$N bash "$HERE/ablation.sh" "$OUT" "ar_s mdlm_s"
R=$OUT/ablation
for m in ar_s mdlm_s; do  # trained without rules (and so predicting without them)
  f="$R/$m.trained_no_rules"
  [ -f "$f.json" ] || python -m launch.evaluate --workdir="$OUT/${m}_no_rules" \
      --data="$D/test.jsonl" --out="$f.json" --num_samples=1 --temperature=0 \
      --max_examples="$N" --max_rollouts=0 --max_steered=0 --save_predictions="$f.predictions.jsonl"
  [ -f "$f.compare.json" ] || python -m launch.compare --data="$D/test.jsonl" \
      --before="$R/$m.none.predictions.jsonl" --after="$f.predictions.jsonl" \
      --out="$f.compare.json" > /dev/null
done
python - "$R" <<'PY'
import json, sys
R = sys.argv[1]
keys = ("pass", "determined_acc", "revealed_valid", "env")
print("\ntrained without rules, change vs trained with all anchors (paired 95% CI)")
for m in ("ar_s", "mdlm_s"):
  c = json.load(open(f"{R}/{m}.trained_no_rules.compare.json"))["metrics"]
  print(f"| {m} | " + " | ".join(
      f"{c[k]['diff']:+.3f} [{c[k]['low']:+.3f}, {c[k]['high']:+.3f}]" for k in keys) + " |")
PY
