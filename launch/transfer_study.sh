#!/usr/bin/env bash
# The transfer experiment (docs/results.md, "Agents trained in the world
# model"): world models (MDLM and AR, equal size) of the built-in corpus plus
# the training split of two real environments; a behaviour-cloned agent; GRPO
# in the AR world model, in the MDLM world model and in the real environment
# (same episode budget); every agent evaluated in the REAL environments on
# test games no model saw; the world models' one-step state checks on the
# real test split; Word2World's protocol (launch.wm2real: the BC agent inside
# each world model from the real games' starts, and its winning action
# sequences replayed in the real games); and, as an optional extra arm, an
# MDLM world model adapted longer with its own GRPO arm. The MDLM world model
# follows the quickstart's recipe: the AR world model's step AR_START,
# adapted to block diffusion for the rest of WM_STEPS (the same total
# steps as the AR). Each stage is skipped when its output
# exists, so a rerun resumes. Sized for a 2-core CPU (about 3 hours run one
# stage at a time); scale with the variables.
# STAGES=REGEX runs only the stages whose names match (to run independent ones
# side by side: the world models, the BC agent); the report needs them all.
# Usage: bash launch/transfer_study.sh [OUT_DIR]
set -euo pipefail

# All in one function, so that bash has parsed the whole script before it
# runs a stage (an edit to this file during a run cannot derail it).
study() {
  OUT=${1:-/tmp/transfer}
  D=$OUT/data
  ENVS=${ENVS:-textworld_express/coin,textworld/coin_collector}
  CORPUS_ENVS=${CORPUS_ENVS:-all,textworld_express:coin,textworld:coin_collector}
  WM_STEPS=${WM_STEPS:-600}          # world-model training steps (quickstart backbone)
  BC_STEPS=${BC_STEPS:-450}          # behaviour-cloning steps
  GRPO_STEPS=${GRPO_STEPS:-20}       # agent GRPO steps of B x G = 4 x 4 episodes
  HORIZON=${HORIZON:-10}             # episode step limit, in GRPO and in evaluation
  EVAL_EPISODES=${EVAL_EPISODES:-100}  # test games per environment (fewer if it has fewer)
  AR_START=${AR_START:-300}          # the MDLM world model starts from the AR's step AR_START
  # An extra arm: an MDLM world model adapted from the same AR start for this
  # many steps in all (0: none).
  MDLM_LONG_STEPS=${MDLM_LONG_STEPS:-0}
  mkdir -p "$OUT/eval" "$OUT/logs"
  TIMES=$OUT/times.tsv
  touch "$TIMES"

  # stage NAME DONE_FILE COMMAND...: runs COMMAND unless DONE_FILE exists; logs
  # to OUT/logs/NAME.log and appends NAME and its wall seconds to times.tsv.
  stage() {
    local name=$1 done_file=$2
    shift 2
    if [[ -n ${STAGES:-} && ! $name =~ ^(${STAGES})$ ]]; then
      return
    fi
    if [[ -e $done_file ]]; then
      echo "== $name: done ($done_file)"
      return
    fi
    echo "== $name: $*"
    local t0=$SECONDS
    "$@" > "$OUT/logs/$name.log" 2>&1 || { echo "$name failed: see $OUT/logs/$name.log"; exit 1; }
    printf '%s\t%d\n' "$name" $((SECONDS - t0)) >> "$TIMES"
  }

  # marked DONE_FILE COMMAND...: runs COMMAND and, when it succeeds, creates
  # DONE_FILE (the stage marker of a training run, whose workdir exists from
  # its first checkpoint on).
  marked() {
    local done_file=$1
    shift
    "$@" && touch "$done_file"
  }

  stage corpus "$D/stats.json" python -m launch.build_corpus --envs="$CORPUS_ENVS" \
      --episodes_per_env=30 --episodes_per_task=80 --real_splits=train,valid:10,test:10 \
      --tokenizer_vocab=2048 --out_dir="$D"

  # world_model NAME OBJECTIVE STEPS [FLAGS...]: trains OUT/NAME and scores it
  # one step on the real environments' test split.
  world_model() {
    local name=$1 obj=$2 steps=$3
    shift 3
    stage "$name" "$OUT/$name/done" marked "$OUT/$name/done" python -m launch.train \
        --config=configs/quickstart.py --workdir="$OUT/$name" --config.objective="$obj" \
        --config.train.steps="$steps" --config.data.train="$D/train.jsonl" \
        --config.data.valid="$D/valid.jsonl" --config.data.tokenizer="$D/tokenizer.model" "$@"
    stage "${name}_real_test" "$OUT/eval/$name.real_test.json" python -m launch.evaluate \
        --workdir="$OUT/$name" --data="$D/real/test.jsonl" --num_samples=4 \
        --out="$OUT/eval/$name.real_test.json"
  }
  # mdlm_world_model NAME STEPS: the AR world model's step AR_START adapted to
  # block diffusion for STEPS - AR_START steps, at the quickstart's rate.
  mdlm_world_model() {
    local rest=$(($2 - AR_START))
    world_model "$1" mdlm "$rest" --config.train.init_from="$OUT/wm_ar" \
        --config.train.init_step="$AR_START" --config.train.ar_start_steps=0 \
        --config.optim.lr="$AR_START_LR" --config.optim.warmup_steps=$((rest < 30 ? rest - 1 : 30))
  }
  AR_START_LR=$(python -c "from configs.quickstart import get_config; print(get_config().train.ar_start_lr)")
  stage copy_real_test "$OUT/eval/copy.real_test.json" python -m launch.evaluate --baseline=copy \
      --data="$D/real/test.jsonl" --out="$OUT/eval/copy.real_test.json"  # the floor
  world_model wm_ar ar "$WM_STEPS" --config.train.checkpoint_every="$AR_START"
  mdlm_world_model wm_mdlm "$WM_STEPS"
  ARMS="bc grpo_ar grpo_mdlm grpo_real"
  if (( MDLM_LONG_STEPS > 0 )); then
    mdlm_world_model wm_mdlm_long "$MDLM_LONG_STEPS"
    ARMS="$ARMS grpo_mdlm_long"
  fi

  stage bc "$OUT/agent_bc/done" marked "$OUT/agent_bc/done" python -m launch.train_agent \
      --config=configs/agent_bc.py --data="$D" --workdir="$OUT/agent_bc" \
      --config.train.steps="$BC_STEPS"

  # Word2World's protocol: the BC agent inside each world model, from the real
  # test games' starts; its winning action sequences replayed in the real games.
  for wm in wm_ar wm_mdlm; do
    stage "wm2real_$wm" "$OUT/eval/wm2real_$wm.json" python -m launch.wm2real \
        --agent="$OUT/agent_bc" --world_model="$OUT/$wm" --env="$ENVS" --tasks=test \
        --episodes="$EVAL_EPISODES" --max_steps="$HORIZON" --out="$OUT/eval/wm2real_$wm.json"
  done

  GRPO_FLAGS=(--config=configs/agent_grpo.py --agent="$OUT/agent_bc" --env="$ENVS"
              --config.train.steps="$GRPO_STEPS" --config.grpo.horizon="$HORIZON"
              --config.tasks.per_env=80 --config.train.eval_episodes=0)
  # grpo_arm NAME FLAGS...: agent GRPO from the BC agent into OUT/agent_NAME.
  grpo_arm() {
    local name=$1
    shift
    stage "$name" "$OUT/agent_$name/done" marked "$OUT/agent_$name/done" \
        python -m launch.agent_grpo "${GRPO_FLAGS[@]}" "$@" --workdir="$OUT/agent_$name"
  }
  grpo_arm grpo_ar --world_model="$OUT/wm_ar"
  grpo_arm grpo_mdlm --world_model="$OUT/wm_mdlm"
  grpo_arm grpo_real --env_backend=real
  if (( MDLM_LONG_STEPS > 0 )); then
    grpo_arm grpo_mdlm_long --world_model="$OUT/wm_mdlm_long"
  fi

  for arm in $ARMS random expert; do
    agent=$OUT/agent_$arm
    if [[ $arm == random || $arm == expert ]]; then
      agent=$arm  # the environment's own policies, the baselines
    fi
    stage "eval_$arm" "$OUT/eval/$arm.json" python -m launch.evaluate_agent \
        --agent="$agent" --env="$ENVS" --tasks=test --episodes="$EVAL_EPISODES" \
        --max_steps="$HORIZON" --out="$OUT/eval/$arm.json"
  done

  if [[ -n ${STAGES:-} ]]; then
    exit 0
  fi
  python -m launch.transfer_report --study="$OUT" --out="$OUT/transfer.md"
  echo "transfer study done: $OUT/transfer.md"
}

study "$@"
