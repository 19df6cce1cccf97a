#!/usr/bin/env bash
# Loss curves in bf16 and fp16 against fp32 over a few hundred steps on the default corpus
# (issue 4's check at a scale CI cannot afford; tests/train/test_precision_curves.cpp is the
# 120-step version that runs in CI): the same run -- preset, batch, schedule, seed and data
# order -- in fp32, bf16 and fp16 (dynamic loss scaling), then a table from each run's
# metrics.jsonl:
#   final      mean training loss of the last 50 steps
#   vs fp32    its relative difference from fp32's
#   max |d|    the largest per-step |loss - fp32 loss| (nats), and the same after a 20-step
#              moving average (what a plotted curve shows)
#   val        the validation loss at the end (--val-steps batches of the val shard)
#   skipped    steps the fp16 loss scaler skipped; any NaN/inf loss is reported
# The stated tolerance (exit status 1 when a precision misses it): final loss within
# FINAL_TOL (0.005 = 0.5%) of fp32's, moving average within SMOOTH_TOL (0.05) nats at every
# step, no non-finite loss.
#
# usage: bench/precision_curves.sh [path/to/mptrain]
#   env: PRESET (d2), B (8), T (128), STEPS (300), LR (1e-3), WARMUP (20), THREADS (0 = all),
#        OUT (runs/precision-curves), PRECISIONS ("fp32 bf16 fp16")
set -euo pipefail
cd "$(dirname "$0")/.."
MPTRAIN=$(realpath "${1:-build/mptrain}")
PRESET=${PRESET:-d2}
B=${B:-8}
T=${T:-128}
STEPS=${STEPS:-300}
LR=${LR:-1e-3}
WARMUP=${WARMUP:-20}
THREADS=${THREADS:-0}
OUT=${OUT:-runs/precision-curves}
PRECISIONS=${PRECISIONS:-"fp32 bf16 fp16"}

DATA_DIR=$(scripts/prepare_corpus.sh "$MPTRAIN" | tail -n 1)
for p in $PRECISIONS; do
  echo "precision_curves: $p ($PRESET, batch $B x $T, $STEPS steps, lr $LR)" >&2
  rm -rf "$OUT/$p"
  "$MPTRAIN" train --preset "$PRESET" --train-data "$DATA_DIR/*_train_*.bin" --val-data "$DATA_DIR/*_val_*.bin" \
    --batch "$B" --seq "$T" --steps "$STEPS" --lr "$LR" --warmup "$WARMUP" --precision "$p" \
    --val-steps 10 --sample-tokens 0 --log-every 50 --progress lines --threads "$THREADS" --deterministic \
    --run-dir "$OUT/$p" > "$OUT.$p.log" 2>&1 || { echo "precision_curves: $p failed (see $OUT.$p.log)" >&2; exit 1; }
done

FINAL_TOL=${FINAL_TOL:-0.005} SMOOTH_TOL=${SMOOTH_TOL:-0.05} python3 - "$OUT" $PRECISIONS <<'PY'
import json, math, os, re, sys
out, precisions = sys.argv[1], sys.argv[2:]
final_tol, smooth_tol = float(os.environ["FINAL_TOL"]), float(os.environ["SMOOTH_TOL"])
failed = []
def losses(p):
    rows = [json.loads(l) for l in open(f"{out}/{p}/metrics.jsonl")]
    return [r["train_loss"] if r["train_loss"] is not None else math.nan for r in rows]
def val_and_skips(p):
    text = open(f"{out}.{p}.log").read()
    val = re.findall(r"val loss ([0-9.]+|nan|inf)", text)
    skips = re.findall(r"skipped (\d+)", text)
    return (val[-1] if val else "-"), (skips[-1] if skips else "0")
def smooth(xs, w=20):
    return [sum(xs[i - w + 1:i + 1]) / w for i in range(w - 1, len(xs))]
ref = losses(precisions[0])
print(f"| precision | final (last 50) | vs {precisions[0]} | max per-step dloss | max smoothed dloss | val loss | fp16 skipped | non-finite |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for p in precisions:
    xs = losses(p)
    n = min(len(xs), len(ref))
    final, final_ref = sum(xs[n - 50:n]) / 50, sum(ref[n - 50:n]) / 50
    step_d = max(abs(a - b) for a, b in zip(xs[:n], ref[:n]))
    smooth_d = max(abs(a - b) for a, b in zip(smooth(xs[:n]), smooth(ref[:n])))
    bad = sum(1 for x in xs if not math.isfinite(x))
    val, skips = val_and_skips(p)
    print(f"| {p} | {final:.4f} | {100 * (final - final_ref) / final_ref:+.3f}% | {step_d:.4f} | {smooth_d:.4f} | {val} | {skips} | {bad} |")
    if bad or abs(final - final_ref) > final_tol * abs(final_ref) or smooth_d > smooth_tol:
        failed.append(p)
print(f"tolerance: final within {100 * final_tol:g}%, moving average within {smooth_tol:g} nats, no non-finite loss: "
      + ("missed by " + ", ".join(failed) if failed else "met"))
sys.exit(1 if failed else 0)
PY
