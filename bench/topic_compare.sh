#!/usr/bin/env bash
# What BERT pretraining is worth on a labelled task, in one report: the majority class and
# TF-IDF + logistic regression (bench/topic_baselines.py, scikit-learn), then the same BERT
# fine-tuned (train --task classify) from a pretrained body and from random weights with one
# recipe, each scored by `eval` of its best validation weights on the test split.
#
#   bench/topic_compare.sh TASK_DIR BODY [OUT_DIR] [extra train flags...]
#
# TASK_DIR: `mptrain prepare --task topics` output (train/validation/test.tsv, labels.txt).
# BODY: a BERT pretraining checkpoint or run dir (its vocab.txt is the random model's too); build
# it on a corpus made with `--exclude-docs TASK_DIR/heldout.txt`, so no test text was pretrained on.
# The recipe (docs/BERT.md, "What the pretraining is worth"): BATCH 32, SEQ 128, STEPS 3000, LR 1e-3,
# WARMUP 100, WEIGHT_DECAY 0.01, SEEDS "1", VAL_EVERY 500 from the environment; extra train flags
# after OUT_DIR (--precision bf16, --threads 2, ...). MPTRAIN: the binary. With several SEEDS
# (SEEDS="1 2 3") each start is fine-tuned once per seed, and a last row per start gives the mean
# test figures with their spread (min–max).
set -euo pipefail
if [ $# -lt 2 ]; then
  sed -n '2,14p' "$0"
  exit 2
fi
task=$1 body=$2 out=${3:-runs/topic-compare}
shift $(($# < 3 ? 2 : 3))
bin=${MPTRAIN:-build/mptrain}
for f in train.tsv validation.tsv test.tsv labels.txt; do
  [ -f "$task/$f" ] || { echo "topic_compare: $task/$f not found (run prepare --task topics)" >&2; exit 1; }
done
body_dir=$body
[ -f "$body/latest" ] && body_dir="$body/$(cat "$body/latest")"
[ -f "$body_dir/vocab.txt" ] || { echo "topic_compare: $body_dir has no vocab.txt" >&2; exit 1; }
preset=$(/usr/bin/python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))
print({(2,128):"bert-tiny",(4,256):"bert-mini",(4,512):"bert-small",(8,512):"bert-medium",(12,768):"bert-base",
       (24,1024):"bert-large"}.get((c["num_hidden_layers"],c["hidden_size"]),""))' "$body_dir/config.json")
[ -n "$preset" ] || { echo "topic_compare: the body is no BERT preset's shape (random weights need one)" >&2; exit 1; }
mkdir -p "$out"
common=(train --task classify --data "$task/train.tsv" --val-data "$task/validation.tsv" --labels "$task/labels.txt"
  --batch "${BATCH:-32}" --seq "${SEQ:-128}" --steps "${STEPS:-3000}" --lr "${LR:-1e-3}" --warmup "${WARMUP:-100}"
  --weight-decay "${WEIGHT_DECAY:-0.01}" --val-every "${VAL_EVERY:-500}" --progress none "$@")
read -r -a seeds <<<"${SEEDS:-${SEED:-1}}"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for seed in "${seeds[@]}"; do
  "$bin" "${common[@]}" --seed "$seed" --init-from "$body" --run-dir "$out/pretrained-s$seed" \
    >"$out/pretrained-s$seed.log" 2>&1
  "$bin" "${common[@]}" --seed "$seed" --preset "$preset" --vocab "$body_dir/vocab.txt" \
    --run-dir "$out/random-s$seed" >"$out/random-s$seed.log" 2>&1
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
# "| start | validation acc / macro-F1 (best) | test acc / macro-F1 |" rows from the runs' own records.
row() {
  local name=$1 run=$2 val test
  val=$(/usr/bin/python3 -c 'import json,sys
recs=[json.loads(l) for l in open(sys.argv[1]) if "val_macro_f1" in l]
b=max(recs, key=lambda r: r["val_macro_f1"]); print("%.4f | %.4f" % (b["val_acc"], b["val_macro_f1"]))' "$run/metrics.jsonl")
  test=$("$bin" eval --checkpoint "$run/best" --data "$task/test.tsv" --seq "${SEQ:-128}" |
    sed -n 's/.*accuracy \([0-9.]*\) | macro-F1 \([0-9.]*\).*/\1 | \2/p')
  echo "| $name | $val | $test |"
}
/usr/bin/python3 "$(dirname "$0")/topic_baselines.py" "$task" | tail -n +2 | sed 's/^| baseline | validation accuracy | validation macro-F1 | test accuracy | test macro-F1 |$/| start | validation accuracy | validation macro-F1 | test accuracy | test macro-F1 |/'
# The mean of a start's test rows over the seeds, with min–max: "| name, mean of N seeds | ... |".
mean_row() {
  /usr/bin/python3 -c 'import sys
rows=[[float(x) for x in l.split("|")[4:6]] for l in sys.stdin if l.startswith("|")]
cell=lambda v: "%.4f (%.4f–%.4f)" % (sum(v)/len(v), min(v), max(v))
print("| %s, mean of %d seeds (min–max) | | | %s | %s |" % (sys.argv[1], len(rows),
      cell([r[0] for r in rows]), cell([r[1] for r in rows])))' "$1"
}
for start in pretrained random; do
  name="$preset from random weights"
  [ "$start" = pretrained ] && name="$preset from $body (pretrained)"
  rows=""
  for seed in "${seeds[@]}"; do
    r=$(row "$name, seed $seed" "$out/$start-s$seed")
    echo "$r"
    rows+="$r"$'\n'
  done
  if [ "${#seeds[@]}" -gt 1 ]; then printf '%s' "$rows" | mean_row "$name"; fi
done
