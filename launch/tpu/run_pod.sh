#!/usr/bin/env bash
# Trains on every host of a Cloud TPU VM pod slice: one launch.train process
# per host, joined by jax.distributed (it finds the pod from the TPU metadata).
#
#   launch/tpu/run_pod.sh --tpu=NAME --zone=ZONE --workdir=gs://BUCKET/PATH \
#       [--config=configs/base_1b.py] [--project=PROJECT] [--repo_dir=DIR] \
#       [--install] [--dry_run] [-- EXTRA launch.train FLAGS]
#
# Environment defaults for the flags: TPU_NAME, ZONE, PROJECT, WORKDIR, CONFIG,
# REPO_DIR (the repository on every worker, default ~/mdlm-wm), PYTHON (on the
# workers, default python3) and GCS_MOUNT (default /tmp/gcs).
#
# The repository must be on every worker at REPO_DIR (e.g. `gcloud compute tpus
# tpu-vm scp --recurse . NAME:~/mdlm-wm --worker=all`); --install runs
# `pip install -e .` there first. The trainer writes the workdir with file
# APIs (orbax checkpoints, metrics.jsonl, the tokenizer), so a gs:// workdir
# is mounted with gcsfuse on every worker at GCS_MOUNT/BUCKET and launch.train
# gets that path: every host sees the same checkpoints, as orbax needs.
# Data paths in the config (--config.data.train=...) must be readable on every
# worker too (the same mount works). --dry_run prints the gcloud command.
set -euo pipefail

usage() {
  sed -n '5,7p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

tpu="${TPU_NAME:-}"
zone="${ZONE:-}"
project="${PROJECT:-}"
workdir="${WORKDIR:-}"
config="${CONFIG:-configs/base_1b.py}"
repo_dir="${REPO_DIR:-~/mdlm-wm}"
python="${PYTHON:-python3}"
gcs_mount="${GCS_MOUNT:-/tmp/gcs}"
install=0
dry_run=0
extra=()
while (( $# )); do
  case "$1" in
    --tpu=*) tpu="${1#*=}" ;;
    --zone=*) zone="${1#*=}" ;;
    --project=*) project="${1#*=}" ;;
    --workdir=*) workdir="${1#*=}" ;;
    --config=*) config="${1#*=}" ;;
    --repo_dir=*) repo_dir="${1#*=}" ;;
    --install) install=1 ;;
    --dry_run) dry_run=1 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) usage ;;
    *) echo "unknown argument: $1" >&2; usage ;;
  esac
  shift
done
for required in tpu zone workdir; do
  if [[ -z "${!required}" ]]; then
    echo "missing --$required" >&2
    usage
  fi
done

# The command every worker runs, built from quoted words so that flag values
# with spaces or shell characters reach launch.train unchanged.
remote="cd $repo_dir"
if (( install )); then
  remote+=" && $python -m pip install -q -e ."
fi
train_workdir="$workdir"
if [[ "$workdir" == gs://* ]]; then
  path="${workdir#gs://}"
  bucket="${path%%/*}"
  mount="$gcs_mount/$bucket"
  # --rename-dir-limit: orbax finishes a checkpoint by renaming its directory.
  remote+=" && mkdir -p $(printf '%q' "$mount")"
  remote+=" && (mountpoint -q $(printf '%q' "$mount") || gcsfuse --implicit-dirs"
  remote+=" --rename-dir-limit=200000 $(printf '%q' "$bucket") $(printf '%q' "$mount"))"
  train_workdir="$mount${path#"$bucket"}"
fi
train=("$python" -m launch.train --config="$config" --workdir="$train_workdir" --distributed
       "${extra[@]}")
remote+=" && $(printf '%q ' "${train[@]}")"

cmd=(gcloud compute tpus tpu-vm ssh "$tpu" --zone="$zone" --worker=all --command="$remote")
if [[ -n "$project" ]]; then
  cmd+=(--project="$project")
fi
if (( dry_run )); then
  # Single-quoted where needed, so the line can be pasted into a shell.
  for word in "${cmd[@]}"; do
    if [[ "$word" =~ ^[A-Za-z0-9_./=:,@%+-]+$ ]]; then
      printf '%s ' "$word"
    else
      printf "'%s' " "${word//\'/\'\\\'\'}"
    fi
  done
  echo
  exit 0
fi
exec "${cmd[@]}"
