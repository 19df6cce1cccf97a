#!/usr/bin/env bash
# mptrain installed like a C++ tool (CMakeLists.txt's install rules), used from outside the
# checkout: `cmake --install BUILD --prefix P` puts the binary, GPT-2's vocabulary, the recipes
# and the bench peers under P; P/bin/mptrain, run from another directory with no MPTRAIN_VOCAB_DIR,
# prepares a corpus and trains a tiny GPT-2 whose samples are text (its vocabulary found relative
# to itself); every checkpoint carries the tokenizer it was trained with (vocab.json, merges.txt),
# so generate reads the text back with the installed vocabulary gone; and without any vocabulary a
# run says why its samples are ids.
#   tests/scripts/test_install.sh BUILD_DIR
set -uo pipefail
build=$(cd "${1:?usage: test_install.sh BUILD_DIR}" && pwd)
fails=0
check() {  # CONDITION-STATUS MESSAGE
  if [[ $1 != 0 ]]; then echo "FAIL: $2"; fails=$((fails + 1)); else echo "ok: $2"; fi
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset MPTRAIN_VOCAB_DIR

cmake --install "$build" --prefix "$tmp/p" >"$tmp/install.log" 2>&1
check $? "cmake --install (log: $(tail -n 1 "$tmp/install.log"))"
bin="$tmp/p/bin/mptrain"
for f in bin/mptrain share/mptrain/gpt2/encoder.json share/mptrain/gpt2/vocab.bpe \
         share/mptrain/recipes/fortunes-d4.toml share/mptrain/bench/pytorch_gpt2.py; do
  [[ -e "$tmp/p/$f" ]]; check $? "installed $f"
done

# A corpus of its own (no checkout anywhere near): some sentences, documents split on '%'.
mkdir -p "$tmp/work" && cd "$tmp/work" || exit 1
for i in $(seq 1 300); do
  echo "The quick brown fox $i jumps over the lazy dog, and the cat sleeps by the warm fire."
  echo "%"
done >corpus.txt
"$bin" prepare corpus.txt --doc-delimiter '%' --out data --val-fraction 0.1 -q >prepare.log 2>&1
check $? "prepare from $tmp/work with the installed vocabulary ($(tail -n 1 prepare.log))"

train=(train --preset d2 --train-data 'data/*_train_*.bin' --batch 2 --seq 32 --steps 3 --threads 2
       --sample-tokens 12 --progress lines)
"$bin" "${train[@]}" --run-dir run >train.log 2>&1
check $? "train from $tmp/work"
grep -q -- '---- sample ----' train.log; check $? "a sample was printed"
! grep -q 'samples as ids' train.log; check $? "the samples are text, not ids"
ckpt=$(cat run/latest 2>/dev/null)
for f in vocab.json merges.txt; do
  cmp -s "run/$ckpt/$f" "$tmp/p/share/mptrain/gpt2/$( [[ $f == vocab.json ]] && echo encoder.json || echo vocab.bpe)"
  check $? "the checkpoint carries the tokenizer it was trained with: $f"
done

# With the installed vocabulary gone, generate decodes with the checkpoint's own files.
mv "$tmp/p/share/mptrain/gpt2" "$tmp/gpt2-away"
"$bin" generate --checkpoint run --prompt "The quick brown" --max-new-tokens 8 --device cpu >gen.log 2>&1
check $? "generate reads the checkpoint's own tokenizer ($(tail -n 1 gen.log))"
grep -q '^The quick brown' gen.log; check $? "generate printed text"

# And a run with no vocabulary at all says why its samples are ids.
"$bin" "${train[@]}" --run-dir run2 >train2.log 2>&1
check $? "train without any vocabulary still trains"
grep -q 'samples as ids: GPT-2 vocabulary not found' train2.log
check $? "it says why the samples are ids ($(grep -m1 'samples as ids' train2.log))"

echo "$fails failure(s)"
exit $((fails > 0))
