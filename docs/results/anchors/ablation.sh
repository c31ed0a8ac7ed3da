#!/usr/bin/env bash
# Anchor ablation at evaluation time: each model predicts the same test
# transitions greedily with all anchors, then with each one hidden
# (launch.evaluate --ablate; the checks always read the full spec), and
# launch.compare gives each change with a 95% paired bootstrap interval.
# Usage: bash docs/results/anchors/ablation.sh STUDY_OUT [MODELS]   (resumes)
set -euo pipefail
OUT=$1; MODELS=${2:-"ar_s mdlm_s"}; N=${EXAMPLES:-120}
D=$OUT/data; R=$OUT/ablation; mkdir -p "$R"
for m in $MODELS; do
  for a in none s0 task tools rules steer; do
    f="$R/$m.$a"; [ -f "$f.json" ] && continue
    flag=""; [ "$a" = none ] || flag="--ablate=$a"
    python -m launch.evaluate --workdir="$OUT/$m" --data="$D/test.jsonl" --out="$f.json" $flag \
        --num_samples=1 --temperature=0 --max_examples="$N" --max_rollouts=0 --max_steered=0 \
        --save_predictions="$f.predictions.jsonl"
  done
  for a in s0 task tools rules steer; do
    [ -f "$R/$m.$a.compare.json" ] && continue
    python -m launch.compare --data="$D/test.jsonl" --before="$R/$m.none.predictions.jsonl" \
        --after="$R/$m.$a.predictions.jsonl" --out="$R/$m.$a.compare.json" > /dev/null
  done
done
python - "$R" $MODELS <<'PY'
import json, sys
R, models = sys.argv[1], sys.argv[2:]
keys = ("pass", "determined_acc", "revealed_valid", "env")
print("| model | hidden anchor | " + " | ".join(keys) + " |\n|---|---|" + "---|" * len(keys))
for m in models:
  o = json.load(open(f"{R}/{m}.none.json"))["overall"]
  print(f"| {m} | none | " + " | ".join(f"{o[k]['mean']:.3f}" for k in keys) + " |")
  for a in ("s0", "task", "tools", "rules", "steer"):
    c = json.load(open(f"{R}/{m}.{a}.compare.json"))["metrics"]
    print(f"| {m} | {a} | " + " | ".join(
        f"{c[k]['diff']:+.3f} [{c[k]['low']:+.3f}, {c[k]['high']:+.3f}]" for k in keys) + " |")
PY
