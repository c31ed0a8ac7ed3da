#!/usr/bin/env bash
# Failure kinds on steered and adversarial transitions (launch.failures) for the
# copy-s_t floor, the twin ceiling and each world model, on a probe corpus of worlds no model
# trained on (corpus seed 7; built here when missing), greedy decoding.
# Usage: bash docs/results/failures/run.sh OUT "NAME=WORKDIR ..." [ENVS_FILES]
#   ENVS_FILES: which probe files (default train,valid,test: the study's
#   environments; add heldout_env for calendar, which the study holds out).
#   SETS=intent_change,... (environment): score only those sets; the reports
#   are then named NAME.FILES.SETS.json.
set -euo pipefail
OUT=$1; MODELS=$2; FILES=${3:-train,valid,test}
P=$OUT/probe
[ -f "$P/stats.json" ] || python -m launch.build_corpus --envs=all --episodes_per_env=60 \
    --seed=7 --holdout_envs=calendar --tokenizer_vocab=0 --out_dir="$P"
DATA=$(for f in ${FILES//,/ }; do printf '%s,' "$P/$f.jsonl"; done); DATA=${DATA%,}
tag=${FILES//,/_}
SET_FLAGS=()
if [ -n "${SETS:-}" ]; then tag=$tag.${SETS//,/_}; SET_FLAGS=(--sets="$SETS"); fi
for b in copy twin; do  # the floor and the ceiling
  [ -f "$OUT/$b.$tag.json" ] || python -m launch.failures --baseline=$b --data="$DATA" \
      "${SET_FLAGS[@]}" --out="$OUT/$b.$tag.json"
done
for pair in $MODELS; do
  name=${pair%%=*}; wd=${pair#*=}
  [ -f "$OUT/$name.$tag.json" ] || python -m launch.failures --workdir="$wd" --data="$DATA" \
      --temperature=0 "${SET_FLAGS[@]}" --out="$OUT/$name.$tag.json"
done
