#!/usr/bin/env python3
"""Optimizer race: AdamW (a learning-rate sweep), Sophia-G and Muon on the same work.

Every run is `mptrain train` with the same preset, seed (so the same initial weights), batch,
sequence length, step budget and data order (the loader walks the shards in order; Sophia's
Hessian estimate reuses the step's last micro-batch, so it reads no extra data), with warmup then
cosine decay to zero (--min-lr-frac 0: compare optimizers only against an AdamW whose lr was swept
and decays fully). Sophia-G runs its authors' GPT-2 recipe (--recipe sophia-gpt2), Muon the
middle AdamW learning rate with its default match_rms_adamw scaling (no tuning of its own). For each corpus the script prints every run's validation loss every N steps,
the steps and the wall-clock each run needs to reach the best AdamW's final validation loss, and
every run's final validation loss; it writes `mptrain report` pages with the curves.

    python3 bench/optimizer_race.py [--mptrain build/mptrain] [--data data/fortunes ...]
        [--preset d6] [--batch 16] [--seq 64] [--steps 200] [--every 20]
        [--lr 1e-3] [--adamw-lrs 5e-4,1e-3,2e-3] [--sophia-lr 6e-4] [--sophia-rho RHO]
        [--muon-lr LR] [--muon-qkv three] [--precision fp32] [--threads 2]
        [--out runs/optimizer-race] [-- extra flags for every run]

--data takes one or more prepared corpora (directories with *_train_*.bin and *_val_*.bin, as
scripts/prepare_corpus.sh writes). Needs only the Python standard library.
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


def first_reaching(records, target):
    """(step, elapsed seconds) of the first validation at or below target, or (None, None)."""
    for r in records:
        if "val_loss" in r and r["val_loss"] <= target:
            return r["step"], r.get("elapsed_s")
    return None, None


def final_val(records):
    vals = [r["val_loss"] for r in records if "val_loss" in r]
    return vals[-1] if vals else float("nan")


def run(args, data, name, optimizer, lr, extra, out_dir):
    run_dir = os.path.join(out_dir, name)
    os.makedirs(run_dir, exist_ok=True)
    metrics = os.path.join(run_dir, "metrics.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)  # metrics.jsonl is appended to
    cmd = [args.mptrain, "train", "--optimizer", optimizer, "--preset", args.preset,
           "--train-data", os.path.join(data, "*_train_*.bin"), "--val-data", os.path.join(data, "*_val_*.bin"),
           "--batch", str(args.batch), "--seq", str(args.seq), "--steps", str(args.steps),
           "--lr", str(lr), "--warmup", str(args.warmup), "--min-lr-frac", "0",
           "--val-every", str(args.every), "--val-steps", str(args.val_steps), "--log-every", str(args.every),
           "--sample-tokens", "16", "--seed", str(args.seed), "--precision", args.precision,
           "--threads", str(args.threads), "--deterministic", "--progress", "lines", "--run-dir", run_dir]
    if optimizer == "sophia":  # the authors' GPT-2 recipe (rho 0.05, wd 0.2, k 10, betas .965/.99)
        cmd += ["--recipe", "sophia-gpt2"]
        if args.sophia_rho:
            cmd += ["--sophia-rho", str(args.sophia_rho)]
    if optimizer == "muon":
        cmd += ["--muon-qkv", args.muon_qkv]
    cmd += extra
    print("$ " + " ".join(cmd), flush=True)
    t0 = time.time()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        sys.stdout.write(proc.stdout)
        sys.exit(f"optimizer_race: the {name} run failed (exit {proc.returncode})")
    return {"records": read_metrics(metrics), "seconds": time.time() - t0, "dir": run_dir, "lr": lr}


def race(args, data, extra):
    corpus = os.path.basename(os.path.normpath(data))
    out_dir = os.path.join(args.out, corpus)
    runs = {}
    for lr in args.adamw_lrs:
        runs[f"adamw-lr{lr:g}"] = ("adamw", lr)
    runs["sophia"] = ("sophia", args.sophia_lr)
    runs["muon"] = ("muon", args.muon_lr or args.lr)
    results = {name: run(args, data, name, opt, lr, extra, out_dir) for name, (opt, lr) in runs.items()}
    adamw = [n for n in results if n.startswith("adamw")]
    best = min(adamw, key=lambda n: final_val(results[n]["records"]))
    target = final_val(results[best]["records"])
    best_steps, best_secs = first_reaching(results[best]["records"], target)

    print()
    print(f"race on {corpus}: {args.preset}, batch {args.batch}x{args.seq}, {args.steps} steps, {args.precision}, "
          f"seed {args.seed}, warmup {args.warmup} then cosine to 0; target = the best AdamW's final validation "
          f"loss ({best}: {target:.4f})")
    names = list(results)
    print(f"{'step':>6} | " + " ".join(f"{n:>14}" for n in names))
    for step in range(args.every, args.steps + 1, args.every):
        row = []
        for n in names:
            v = next((r["val_loss"] for r in results[n]["records"] if r["step"] == step and "val_loss" in r), None)
            row.append("-" if v is None else f"{v:.4f}")
        print(f"{step:>6} | " + " ".join(f"{x:>14}" for x in row))
    print()
    print(f"{'run':>14} {'lr':>8} {'final val':>10} {'steps to target':>16} {'vs best AdamW':>14} "
          f"{'s to target':>12} {'wall s':>8} {'ms/step':>8}")
    for n in names:
        r = results[n]
        steps, secs = first_reaching(r["records"], target)
        ratio = f"{steps / best_steps:.2f}x" if steps and best_steps else "-"
        ms = [x["ms"] for x in r["records"] if "ms" in x]
        med = sorted(ms)[len(ms) // 2] if ms else float("nan")
        print(f"{n:>14} {r['lr']:>8g} {final_val(r['records']):>10.4f} {steps if steps else 'not reached':>16} "
              f"{ratio:>14} {secs if secs else '-':>12} {r['seconds']:>8.0f} {med:>8.0f}")
    html = os.path.join(out_dir, "race.html")
    rep = subprocess.run([args.mptrain, "report", *[results[n]["dir"] for n in names], "-o", html,
                          "--title", f"Optimizer race on {corpus}"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    print(rep.stdout.strip() if rep.returncode == 0 else f"report failed: {rep.stdout.strip()}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mptrain", default=os.path.join(REPO, "build", "mptrain"))
    ap.add_argument("--data", nargs="+", default=[os.path.join(REPO, "data", "fortunes")])
    ap.add_argument("--preset", default="d6")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--every", type=int, default=20, help="validate and log every N steps")
    ap.add_argument("--val-steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--lr", type=float, default=1e-3, help="the middle of the AdamW sweep; Muon's default lr")
    ap.add_argument("--adamw-lrs", default="", help="comma-separated AdamW lrs (default: lr/2, lr, 2lr)")
    ap.add_argument("--sophia-lr", type=float, default=6e-4, help="default: the recipe's 6e-4")
    ap.add_argument("--sophia-rho", type=float, default=0.0, help="default: the recipe's 0.05")
    ap.add_argument("--muon-lr", type=float, default=0.0, help="default: --lr (match_rms_adamw scaling)")
    ap.add_argument("--muon-qkv", default="three", choices=["three", "one"])
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(REPO, "runs", "optimizer-race"))
    args, extra = ap.parse_known_args()
    extra = [a for a in extra if a != "--"]
    args.adamw_lrs = [float(x) for x in args.adamw_lrs.split(",")] if args.adamw_lrs else \
        [args.lr / 2, args.lr, args.lr * 2]
    if not os.path.exists(args.mptrain):
        sys.exit(f"optimizer_race: no mptrain binary at {args.mptrain} (pass --mptrain)")
    for data in args.data:
        race(args, data, extra)


if __name__ == "__main__":
    main()
