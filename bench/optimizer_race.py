#!/usr/bin/env python3
"""Optimizer race: AdamW and Sophia-G side by side on the same corpus.

Both runs are `mptrain train` with the same preset, seed (so the same initial weights),
batch, sequence length, schedule and step budget, and the same data order (the loader
walks the shards in order; Sophia's Hessian estimate reuses the step's last micro-batch,
so it reads no extra data). The script prints each run's training loss (mean over the
last N steps) and validation loss every N steps, Sophia's win rate, and the steps each
optimizer needs to reach a target validation loss (default: AdamW's final one).

    python3 bench/optimizer_race.py [--mptrain build/mptrain] [--data data/fortunes]
        [--preset d2] [--batch 16] [--seq 64] [--steps 400] [--every 25]
        [--lr 2e-3] [--sophia-lr LR] [--sophia-rho 0.04] [--target LOSS]
        [--threads 2] [--out runs/optimizer-race] [-- extra flags for both runs]

The corpus is the one scripts/prepare_corpus.sh writes (data/fortunes/*.bin).
Needs only the Python standard library.
"""

import argparse
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read_metrics(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def steps_to(records, target):
    """First step whose validation loss is <= target (None if never)."""
    for r in records:
        if "val_loss" in r and r["val_loss"] <= target:
            return r["step"]
    return None


def run(args, optimizer, extra):
    run_dir = os.path.join(args.out, optimizer)
    if os.path.exists(os.path.join(run_dir, "metrics.jsonl")):
        os.remove(os.path.join(run_dir, "metrics.jsonl"))  # metrics.jsonl is appended to
    lr = args.sophia_lr if (optimizer == "sophia" and args.sophia_lr) else args.lr
    cmd = [args.mptrain, "train", "--optimizer", optimizer, "--preset", args.preset,
           "--train-data", os.path.join(args.data, "*_train_*.bin"),
           "--val-data", os.path.join(args.data, "*_val_*.bin"),
           "--batch", str(args.batch), "--seq", str(args.seq), "--steps", str(args.steps),
           "--lr", str(lr), "--warmup", str(args.warmup), "--min-lr-frac", str(args.min_lr_frac),
           "--val-every", str(args.every), "--val-steps", str(args.val_steps),
           "--log-every", str(args.every), "--sample-tokens", "16", "--seed", str(args.seed),
           "--threads", str(args.threads), "--deterministic", "--run-dir", run_dir]
    if optimizer == "sophia":
        cmd += ["--sophia-rho", str(args.sophia_rho), "--sophia-k", str(args.sophia_k)]
    cmd += extra
    print("$ " + " ".join(cmd), flush=True)
    t0 = time.time()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        sys.stdout.write(proc.stdout)
        sys.exit(f"optimizer_race: the {optimizer} run failed (exit {proc.returncode})")
    seconds = time.time() - t0
    return read_metrics(os.path.join(run_dir, "metrics.jsonl")), seconds


def window_mean(records, step, n):
    vals = [r["train_loss"] for r in records if step - n < r["step"] <= step]
    return sum(vals) / len(vals) if vals else float("nan")


def fmt(x, spec="{:.4f}"):
    return "-" if x is None else spec.format(x)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mptrain", default=os.path.join(REPO, "build", "mptrain"))
    ap.add_argument("--data", default=os.path.join(REPO, "data", "fortunes"))
    ap.add_argument("--preset", default="d2")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--every", type=int, default=25, help="print / validate every N steps")
    ap.add_argument("--val-steps", type=int, default=8)
    ap.add_argument("--lr", type=float, default=2e-3, help="peak learning rate (both, unless --sophia-lr)")
    ap.add_argument("--sophia-lr", type=float, default=0.0)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--sophia-rho", type=float, default=0.04)
    ap.add_argument("--sophia-k", type=int, default=10)
    ap.add_argument("--target", type=float, default=0.0, help="target validation loss (0 = AdamW's final)")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(REPO, "runs", "optimizer-race"))
    args, extra = ap.parse_known_args()
    extra = [a for a in extra if a != "--"]
    if not os.path.exists(args.mptrain):
        sys.exit(f"optimizer_race: no mptrain binary at {args.mptrain} (pass --mptrain)")

    results = {}
    for opt in ("adamw", "sophia"):
        results[opt] = run(args, opt, extra)
    (a, a_sec), (s, s_sec) = results["adamw"], results["sophia"]
    a_by, s_by = {r["step"]: r for r in a}, {r["step"]: r for r in s}
    last_win = None

    print()
    print(f"race: {args.preset}, batch {args.batch}x{args.seq}, {args.steps} steps, seed {args.seed}, "
          f"lr {args.lr}{'' if not args.sophia_lr else ' (sophia ' + str(args.sophia_lr) + ')'}, "
          f"sophia rho {args.sophia_rho} k {args.sophia_k}")
    print(f"{'step':>6} | {'adamw train':>11} {'adamw val':>9} | {'sophia train':>12} {'sophia val':>10} {'win rate':>8}")
    for step in range(args.every, args.steps + 1, args.every):
        for r in s:
            if r["step"] <= step and "win_rate" in r:
                last_win = r["win_rate"]
        print(f"{step:>6} | {window_mean(a, step, args.every):>11.4f} {fmt(a_by.get(step, {}).get('val_loss')):>9} | "
              f"{window_mean(s, step, args.every):>12.4f} {fmt(s_by.get(step, {}).get('val_loss')):>10} "
              f"{fmt(last_win, '{:.3f}'):>8}")
    a_final = [r["val_loss"] for r in a if "val_loss" in r][-1]
    s_final = [r["val_loss"] for r in s if "val_loss" in r][-1]
    target = args.target if args.target > 0 else a_final
    sa, ss = steps_to(a, target), steps_to(s, target)
    print(f"final val loss: adamw {a_final:.4f}, sophia {s_final:.4f}")
    print(f"steps to val loss <= {target:.4f} (checked every {args.every}): adamw {fmt(sa, '{}')}, "
          f"sophia {fmt(ss, '{}')}"
          + (f" (sophia/adamw = {ss / sa:.2f})" if sa and ss else ""))
    print(f"wall time: adamw {a_sec:.1f} s, sophia {s_sec:.1f} s "
          f"(Sophia adds one forward+backward every k = {args.sophia_k} steps)")


if __name__ == "__main__":
    main()
