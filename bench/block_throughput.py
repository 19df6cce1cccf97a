#!/usr/bin/env python3
"""Throughput of the race's two blocks (issue 40): GPT-2 d6 against llama-d6, alternated.

The race (bench/block_race.py) reads ms/step from runs made one after another, minutes apart, so
the host's drift between them enters the ratio. Here the two blocks' `mptrain bench` steps run in
the same invocation, alternating (gpt2, llama, gpt2, llama, ... for each optimizer), on the race's
batch, sequence length, precision and threads; each side's median ms/step is compared, and the
ratio printed is llama's tokens/s over GPT-2's (the issue's target: within 10%, >= 0.90).

    python3 bench/block_throughput.py [--rounds 5] [--steps 20] [--optimizers adamw,muon]
        [--llama-flags "--qk-norm"] [--json runs/block-throughput.json]

The load average before the first run and the cores other processes took during the whole
measurement (machine busy time less the children's) are printed with the host: a ratio counts
only from a quiet machine (load under ~0.5 before, others near 0 during). Needs only the Python
standard library.
"""

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "bench"))

from block_race import FAMILIES, busy_seconds, children_seconds, host_signature, median  # noqa: E402


def bench_ms(args, family, optimizer):
    """One `mptrain bench` process: its median ms/step over the timed steps."""
    model, preset = FAMILIES[family]
    cmd = [args.mptrain, "bench", "--model", model, "--preset", preset, "--optimizer", optimizer,
           "--batch", str(args.batch), "--seq", str(args.seq), "--steps", str(args.steps),
           "--warmup", str(args.warmup), "--precision", args.precision, "--threads", str(args.threads),
           "--no-peer", "--rounds", "1", "--progress", "none", "--quiet"]
    if family == "llama":
        cmd += shlex.split(args.llama_flags)
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"block_throughput: {' '.join(cmd)} failed ({out.returncode}):\n{out.stdout}{out.stderr}")
    for line in out.stdout.splitlines():
        m = re.match(r"mptrain \S+: ([0-9.]+) ms/step", line)
        if m:
            return float(m.group(1))
    sys.exit(f"block_throughput: no 'mptrain ...: N ms/step' line from {' '.join(cmd)}:\n{out.stdout}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mptrain", default=os.path.join(REPO, "build", "mptrain"))
    ap.add_argument("--optimizers", default="adamw,muon")
    ap.add_argument("--rounds", type=int, default=5, help="alternations of the two blocks per optimizer")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--steps", type=int, default=20, help="timed steps per bench process")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--precision", default="bf16")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--llama-flags", default="--qk-norm", help="the modern block's options")
    ap.add_argument("--json", default="", help="also write the figures here")
    args = ap.parse_args()

    load_before = os.getloadavg()[0]
    busy0, child0, t0 = busy_seconds(), children_seconds(), time.time()
    print(f"host: {host_signature()}; load before {load_before:.2f}", flush=True)
    result = {"host": host_signature(), "load_before": load_before, "optimizers": {}}
    for optimizer in args.optimizers.split(","):
        ms = {"gpt2": [], "llama": []}
        for r in range(args.rounds):
            for family in ("gpt2", "llama"):
                ms[family].append(bench_ms(args, family, optimizer))
            print(f"{optimizer} round {r + 1}/{args.rounds}: gpt2 {ms['gpt2'][-1]:.1f} ms/step, "
                  f"llama {ms['llama'][-1]:.1f} ms/step", flush=True)
        g, m = median(ms["gpt2"]), median(ms["llama"])
        print(f"{optimizer}: gpt2 d6 {g:.1f} ms/step, llama-d6 {args.llama_flags} {m:.1f} ms/step (medians "
              f"of {args.rounds}): llama's throughput {g / m:.3f}x GPT-2's", flush=True)
        result["optimizers"][optimizer] = {"gpt2_ms": ms["gpt2"], "llama_ms": ms["llama"], "ratio": g / m}
    wall = time.time() - t0
    others = max(0.0, (busy_seconds() - busy0) - (children_seconds() - child0)) / wall
    result["others_cores"] = others
    print(f"others took {others:.2f} cores during the {wall:.0f} s", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
