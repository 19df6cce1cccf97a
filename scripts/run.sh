#!/usr/bin/env bash
# The main job from nothing: installs dependencies, builds, prepares the default corpus
# (Debian's fortunes, tokenized with GPT-2's BPE), trains a small GPT-2 for a few minutes
# on whatever hardware is present, and prints generated text.
# Override with environment variables: PRESET, STEPS, BATCH, SEQ, LR, RUN_DIR, THREADS.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD_TARGET=mptrain scripts/build.sh
DATA_DIR=$(scripts/prepare_corpus.sh build/mptrain | tail -n 1)

# The run itself is recipes/fortunes-d4.toml; these variables, when set, override its values.
RUN_DIR=${RUN_DIR:-runs/fortunes-d4}
THREADS=${THREADS:-0}

build/mptrain train --config recipes/fortunes-d4.toml \
  --train-data "$DATA_DIR/*_train_*.bin" --val-data "$DATA_DIR/*_val_*.bin" \
  ${PRESET:+--preset "$PRESET"} ${STEPS:+--steps "$STEPS"} ${BATCH:+--batch "$BATCH"} ${SEQ:+--seq "$SEQ"} \
  ${LR:+--lr "$LR"} --threads "$THREADS" --run-dir "$RUN_DIR"

echo
echo "== samples from $RUN_DIR =="
build/mptrain generate --checkpoint "$RUN_DIR" --prompt "The meaning of life is" --max-new-tokens 48 \
  --top-k 40 --temperature 0.9 --num-samples 3
