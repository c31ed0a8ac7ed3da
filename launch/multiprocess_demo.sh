#!/usr/bin/env bash
# Two JAX processes on this machine train like one: a localhost proof of the
# multi-host path (jax.distributed + gloo CPU collectives, grain shards per
# process, orbax checkpoints written by both processes).
#
#   bash launch/multiprocess_demo.sh [--workdir=DIR] [--corpus=DIR] [--steps=N]
#                                    [--port=P] [--dry_run]
#
# Three runs of configs/tiny.py, every one over 8 CPU devices and 2 data shards:
#   reference  1 process x 8 devices, mesh (2,2,2), steps 1..N
#   2proc      2 processes x 4 devices, mesh (2,2,2), steps 1..N/2, then a checkpoint
#   resumed    1 process x 8 devices, mesh (1,8,1), restores 2proc's checkpoint, steps N/2+1..N
# and a table of their losses side by side. --corpus: a build_corpus output
# (default: a small one is built in WORKDIR/corpus). --dry_run prints the
# commands instead of running them.
set -euo pipefail

usage() {
  sed -n '6,7p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

workdir=/tmp/mdlm_wm_multiprocess_demo
corpus=""
steps=6
port=""
dry_run=0
for arg in "$@"; do
  case "$arg" in
    --workdir=*) workdir="${arg#*=}" ;;
    --corpus=*) corpus="${arg#*=}" ;;
    --steps=*) steps="${arg#*=}" ;;
    --port=*) port="${arg#*=}" ;;
    --dry_run) dry_run=1 ;;
    -h|--help) usage ;;
    *) echo "unknown argument: $arg" >&2; usage ;;
  esac
done
if ! [[ "$steps" =~ ^[0-9]+$ ]] || (( steps < 2 )); then
  echo "--steps must be an integer >= 2, got '$steps'" >&2
  exit 2
fi
python="${PYTHON:-python}"
if [[ -z "$port" ]]; then
  port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("localhost", 0))
print(s.getsockname()[1])')
fi
corpus="${corpus:-$workdir/corpus}"
half=$((steps / 2))
common=(--config=configs/tiny.py --config.data.train="$corpus/train.jsonl"
        --config.data.valid="$corpus/valid.jsonl" --config.data.tokenizer="$corpus/tokenizer.model"
        --config.train.steps="$steps" --config.train.eval_batches=0
        --config.train.checkpoint_every=1000 --data_shards=2)
eight_devices="XLA_FLAGS=--xla_force_host_platform_device_count=8"

# run NAME ENV... -- ARGS...: one launch.train process, its output in logs/NAME.log.
run() {
  local name="$1"; shift
  local env=()
  while [[ "$1" != "--" ]]; do env+=("$1"); shift; done
  shift
  if (( dry_run )); then
    # One write per line: the two processes' lines are printed concurrently.
    echo "$(printf '%q ' env "${env[@]}" "$python" -m launch.train "$@")> $workdir/logs/$name.log"
  else
    env "${env[@]}" "$python" -m launch.train "$@" > "$workdir/logs/$name.log" 2>&1
  fi
}

if (( ! dry_run )); then
  trap 'echo "failed: see the logs in $workdir/logs" >&2' ERR
  rm -rf "$workdir/reference" "$workdir/2proc" "$workdir/logs"
  mkdir -p "$workdir/logs"
  if [[ ! -f "$corpus/tokenizer.model" ]]; then
    "$python" -m launch.build_corpus --envs=all --episodes_per_env=8 --seed=1 \
      --tokenizer_vocab=512 --out_dir="$corpus" > "$workdir/logs/corpus.log" 2>&1
  fi
fi

run reference "$eight_devices" -- "${common[@]}" --config.mesh.shape="(2,2,2)" \
  --workdir="$workdir/reference"
pids=()
for id in 0 1; do
  run "2proc.process$id" JAX_NUM_CPU_DEVICES=4 COORDINATOR_ADDRESS="localhost:$port" \
    NUM_PROCESSES=2 PROCESS_ID="$id" -- "${common[@]}" --config.mesh.shape="(2,2,2)" \
    --workdir="$workdir/2proc" --max_steps="$half" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
if (( dry_run )); then
  echo "cp -r $workdir/2proc $workdir/resumed"
else
  rm -rf "$workdir/resumed" && cp -r "$workdir/2proc" "$workdir/resumed"
fi
run resumed "$eight_devices" -- "${common[@]}" --config.mesh.shape="(1,8,1)" \
  --workdir="$workdir/resumed"
(( dry_run )) && exit 0

grep -h "^process " "$workdir"/logs/2proc.process*.log
echo "2proc checkpoint $half, one part per process:" \
  $(cd "$workdir/2proc/checkpoints/$half" && ls -d state/ocdbt.process_* data/process_*)
echo "resumed (1 process x 8 devices): $(grep -h "resumed from step" "$workdir/logs/resumed.log")"
"$python" - "$workdir" "$half" <<'EOF'
import json, os, sys
workdir, half = sys.argv[1], int(sys.argv[2])
def losses(run):
  with open(os.path.join(workdir, run, "metrics.jsonl")) as f:
    return {r["step"]: r["loss"] for r in map(json.loads, f) if "loss" in r}
ref, two, resumed = losses("reference"), losses("2proc"), losses("resumed")
print(f"{'step':>4}  {'1 process x 8':>13}  {'2 processes x 4':>15}  {'resumed on 1':>12}  "
      f"{'|diff|':>8}")
worst = 0.0
for step in sorted(ref):
  other = two[step] if step <= half else resumed[step]
  worst = max(worst, abs(other - ref[step]))
  two_cell = f"{two[step]:15.6f}" if step <= half else " " * 15
  resumed_cell = f"{resumed[step]:12.6f}" if step > half else " " * 12
  print(f"{step:4d}  {ref[step]:13.6f}  {two_cell}  {resumed_cell}  {abs(other - ref[step]):8.1e}")
print(f"max |loss difference| {worst:.1e}")
EOF
