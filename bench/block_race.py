#!/usr/bin/env python3
"""Block race (issue 40): the GPT-2 block against the modern (Llama-style) block, same work.

Both families train with `mptrain train` on the same corpus, batch, sequence length, step budget,
warmup-then-cosine-to-zero schedule and data order, at the same parameter count (GPT-2 d6 and its
twin llama-d6: 6 x 384, 12*C^2 weights a block, tied heads). For each optimizer (AdamW, Muon) and
each family the learning rate is swept; where the best (lowest final validation loss) lies at the
sweep's edge the sweep is extended by a factor of 2 past that edge (at most --max-extend times), so
that the best lies inside it. Each best is then rerun with the second seed.

The target is the validation loss the GPT-2 block's best AdamW run reaches at --target-minutes
(its first validation at or after that wall time); every run's wall time and tokens to that loss
are read from its metrics.jsonl (`elapsed_s` of the first validation at or below it), and beside
it the time from which every later validation stays at or below it (without --shuffle the loader
reads the documents in order, so a curve can dip under the target early and rise again). The ratio is
the modern block's time over GPT-2's under the same optimizer, each the median of its seeds (the
mean of two). Throughput: median ms/step of each family's runs under each optimizer.

    python3 bench/block_race.py [--mptrain build/mptrain] [--data data/fortunes]
        [--optimizers adamw,muon] [--steps 600] [--batch 16] [--seq 64] [--precision bf16]
        [--adamw-lrs 5e-4,1e-3,2e-3] [--muon-lrs 1e-3,2e-3,4e-3] [--llama-flags "--qk-norm"]
        [--seeds 1,2] [--shuffle] [--deadline 2026-11-29T03:20] [--out runs/block-race]

A race may be continued on another day or machine: --target-loss fixes the target at an earlier
race's value, and --bests takes the sweeps' bests from it (family-optimizer=lr, comma-separated), so
only the runs still missing are made (every seed of each best: seed 1 again on a new host). Each run
records in host.json its host (CPU model and the flags that matter), the load average before it and
the cores other processes took while it ran; the report gives the ratio per seed as well, each
seed's GPT-2/modern pair timed on one host, and their median (wall times of two CPUs do not mix).

--archive DIR keeps what the report reads of each run (its validation records, which carry the
step's ms, and host.json) in DIR/<run>/, small enough to commit; copied back under --out, those
runs count as complete and are reused, so a race spans sessions whose checkouts start without runs/.

--shuffle passes `train --shuffle` to every run (a new order of sequences each epoch, from the
seed); give it its own --out, as the run names do not say the order. Runs already complete under
--out (metrics.jsonl holding the last step) are reused, so a race cut by --deadline resumes where
it stopped. Needs only the Python standard library.
"""

import argparse
import datetime
import glob
import json
import os
import re
import resource
import shlex
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "bench"))

from optimizer_race import final_val, first_reaching, read_metrics  # noqa: E402

FAMILIES = {"gpt2": ("gpt2", "d6"), "llama": ("llama", "llama-d6")}


def run_name(family, optimizer, lr, seed):
    return f"{family}-{optimizer}-lr{lr:g}-seed{seed}"


def host_signature():
    """The CPU model and the flags that decide its speed, as the benchmarks name a host."""
    model, flags = "unknown", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model == "unknown":
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags"):
                    flags |= set(line.split(":", 1)[1].split())
    except OSError:
        pass
    wanted = [x for x in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if x in flags]
    return f"{model} ({' '.join(wanted)})"


def busy_seconds():
    """CPU seconds all processes have run (user, nice, system, irq, softirq, steal) since boot."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def children_seconds():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def read_host(run_dir):
    try:
        with open(os.path.join(run_dir, "host.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {"host": "unrecorded", "load_before": None}


def complete(metrics, steps):
    if not os.path.exists(metrics):
        return False
    return any(r.get("step") == steps and "val_loss" in r for r in read_metrics(metrics))


class Race:
    def __init__(self, args):
        self.args = args
        self.results = {}  # name -> {"records", "seconds", "lr", "family", "optimizer", "seed"}
        self.deadline = datetime.datetime.fromisoformat(args.deadline) if args.deadline else None
        self.run_seconds = []  # wall of the runs made here, to judge whether one more fits

    def out_of_time(self):
        if not self.deadline:
            return False
        guess = max(self.run_seconds) if self.run_seconds else 0
        return datetime.datetime.now() + datetime.timedelta(seconds=guess) > self.deadline

    def run(self, family, optimizer, lr, seed):
        a = self.args
        name = run_name(family, optimizer, lr, seed)
        if name in self.results:
            return self.results[name]
        run_dir = os.path.join(a.out, name)
        metrics = os.path.join(run_dir, "metrics.jsonl")
        model, preset = FAMILIES[family]
        if not complete(metrics, a.steps):
            if self.out_of_time():
                print(f"block_race: deadline {a.deadline}: {name} not started", flush=True)
                return None
            os.makedirs(run_dir, exist_ok=True)
            if os.path.exists(metrics):
                os.remove(metrics)  # a run cut short: metrics.jsonl is appended to
            cmd = [a.mptrain, "train", "--model", model, "--preset", preset, "--optimizer", optimizer,
                   "--train-data", os.path.join(a.data, "*_train_*.bin"),
                   "--val-data", os.path.join(a.data, "*_val_*.bin"),
                   "--batch", str(a.batch), "--seq", str(a.seq), "--steps", str(a.steps), "--lr", str(lr),
                   "--warmup", str(a.warmup), "--min-lr-frac", "0", "--val-every", str(a.every),
                   "--val-steps", str(a.val_steps), "--log-every", str(a.every), "--sample-tokens", "16",
                   "--seed", str(seed), "--precision", a.precision, "--threads", str(a.threads),
                   "--progress", "lines", "--save-every", "0", "--run-dir", run_dir]
            if a.shuffle:
                cmd.append("--shuffle")
            if family == "llama":
                cmd += shlex.split(a.llama_flags)
            print("$ " + " ".join(cmd), flush=True)
            host = {"host": host_signature(), "load_before": os.getloadavg()[0],
                    "started": datetime.datetime.now().isoformat(timespec="seconds")}
            t0, busy0, mine0 = time.time(), busy_seconds(), children_seconds()
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if proc.returncode != 0:
                sys.stdout.write(proc.stdout)
                sys.exit(f"block_race: the {name} run failed (exit {proc.returncode})")
            wall = time.time() - t0
            self.run_seconds.append(wall)
            # The cores others took while it ran: the whole machine's busy time less the run's own.
            # (load_before of a run right after another is that run's load, not others'.)
            others = (busy_seconds() - busy0 - (children_seconds() - mine0)) / wall
            with open(os.path.join(run_dir, "host.json"), "w") as f:
                json.dump({**host, "others_cores": round(max(others, 0.0), 3)}, f)
        records = read_metrics(metrics)
        r = {"records": records, "lr": lr, "family": family, "optimizer": optimizer, "seed": seed,
             "dir": run_dir, "host": read_host(run_dir),
             "seconds": max((x.get("elapsed_s", 0) for x in records), default=0)}
        self.results[name] = r
        print(f"  {name}: final val {final_val(records):.4f}", flush=True)
        return r

    def sweep(self, family, optimizer, lrs):
        """The best lr of a sweep extended past its edge until the best lies inside (or None)."""
        seed = self.args.seeds[0]
        lrs = sorted(lrs)
        for _ in range(self.args.max_extend + 1):
            done = [self.run(family, optimizer, lr, seed) for lr in lrs]
            if any(r is None for r in done):
                return None
            best = min(range(len(lrs)), key=lambda i: final_val(done[i]["records"]))
            if 0 < best < len(lrs) - 1:
                return lrs[best]
            lrs = [lrs[0] / 2] + lrs if best == 0 else lrs + [lrs[-1] * 2]
        print(f"block_race: {family} {optimizer}: the best lr is still at the sweep's edge ({lrs})", flush=True)
        return lrs[best]


def median(xs):
    """The median (of two: their mean), as the issue's 'median of 2 seeds'."""
    s = sorted(xs)
    return s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2


def staying_below(records, target):
    """(step, elapsed seconds) of the first validation from which every later one is at or below
    target, or (None, None): read in order (no --shuffle), a validation curve can dip below the
    target early and rise again as the documents change."""
    vals = [r for r in records if "val_loss" in r]
    for i, r in enumerate(vals):
        if all(v["val_loss"] <= target for v in vals[i:]):
            return r["step"], r.get("elapsed_s")
    return None, None


def seed_ratios(race, bests, optimizer, target):
    """{seed: {ratio, host}} of llama's time to the target over gpt2's, for each seed whose two runs
    ran on the same recorded host (a pair timed on two CPUs, or on unknown ones, says nothing)."""
    out = {}
    for seed in race.args.seeds:
        pair = [race.results.get(run_name(f, optimizer, bests.get((f, optimizer), 0), seed)) for f in ("llama", "gpt2")]
        if not all(pair):
            continue
        hosts = {r["host"].get("host") for r in pair}
        secs = [first_reaching(r["records"], target)[1] for r in pair]
        if len(hosts) != 1 or "unrecorded" in hosts or not all(secs):
            continue
        out[seed] = {"ratio": secs[0] / secs[1], "host": hosts.pop()}
    return out


def tokens_per_step(args):
    return args.batch * args.seq


def report(race, bests, target, target_src):
    a = race.args
    print()
    corpora = "+".join(sorted(os.path.basename(os.path.normpath(d)) for d in glob.glob(a.data))) or a.data
    order = "shuffled" if a.shuffle else "in order"
    print(f"block race on {corpora} ({order}): gpt2 d6 vs llama-d6 {a.llama_flags}, "
          f"batch {a.batch}x{a.seq}, {a.steps} steps, {a.precision}, warmup {a.warmup} then cosine to 0")
    print(f"target: validation loss {target:.4f} ({target_src})")
    print(f"{'run':>34} {'final val':>10} {'s to target':>12} {'tokens to target':>17} {'s staying below':>16} "
          f"{'ms/step':>8} {'load':>5} {'others':>6}  host")
    fmt = lambda s: f"{s:.0f}" if s else "-"  # noqa: E731
    for name, r in sorted(race.results.items()):
        step, secs = first_reaching(r["records"], target)
        _, stay = staying_below(r["records"], target)
        ms = sorted(x["ms"] for x in r["records"] if "ms" in x)
        med = ms[len(ms) // 2] if ms else float("nan")
        load, others = r["host"].get("load_before"), r["host"].get("others_cores")
        print(f"{name:>34} {final_val(r['records']):>10.4f} {fmt(secs):>12} "
              f"{step * tokens_per_step(a) if step else '-':>17} {fmt(stay):>16} {med:>8.0f} "
              f"{f'{load:.2f}' if load is not None else '-':>5} {f'{others:.2f}' if others is not None else '-':>6}  "
              f"{r['host'].get('host')}")
    summary = {}
    for optimizer in a.optimizers:
        times = {}
        for family in FAMILIES:
            lr = bests.get((family, optimizer))
            if lr is None:
                continue
            secs, stays = [], []
            for seed in a.seeds:
                r = race.results.get(run_name(family, optimizer, lr, seed))
                if r:
                    s = first_reaching(r["records"], target)[1]
                    secs.append(s if s else float("inf"))
                    s = staying_below(r["records"], target)[1]
                    stays.append(s if s else float("inf"))
            if secs:
                times[family] = (median(secs), median(stays))
                summary[f"{family}-{optimizer}"] = {"lr": lr, "seconds_to_target": secs,
                                                    "seconds_staying_below": stays}
        per_seed = seed_ratios(race, bests, optimizer, target)
        if per_seed:
            summary[f"ratio_per_seed-{optimizer}"] = per_seed
            print(f"{optimizer}: llama/gpt2 time to the target per seed (each pair on one host): "
                  + ", ".join(f"seed {s} {v['ratio']:.2f}x on {v['host']}" for s, v in per_seed.items())
                  + f"; median {median([v['ratio'] for v in per_seed.values()]):.2f}x")
        if "gpt2" in times and "llama" in times:
            ratio = times["llama"][0] / times["gpt2"][0]
            stay = times["llama"][1] / times["gpt2"][1]
            summary[f"ratio-{optimizer}"] = ratio
            summary[f"ratio_staying_below-{optimizer}"] = stay
            print(f"{optimizer}: llama {times['llama'][0]:.0f} s vs gpt2 {times['gpt2'][0]:.0f} s to the target: "
                  f"{ratio:.2f}x (target <= 0.85x); staying below it: {stay:.2f}x")
    for optimizer in a.optimizers:  # each optimizer's own: Muon's step costs more than AdamW's
        med = {}
        for family in FAMILIES:
            ms = sorted(x["ms"] for r in race.results.values() if r["family"] == family and r["optimizer"] == optimizer
                        for x in r["records"] if "ms" in x)
            if ms:
                med[family] = summary[f"ms_per_step-{family}-{optimizer}"] = ms[len(ms) // 2]
        if len(med) == 2:
            print(f"throughput under {optimizer}: llama {med['llama']:.0f} ms/step vs gpt2 {med['gpt2']:.0f}: "
                  f"llama's tokens/s {med['gpt2'] / med['llama']:.2f}x gpt2's (target >= 0.90x)")
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump({"target": target, "bests": {f"{k[0]}-{k[1]}": v for k, v in bests.items()}, **summary}, f,
                  indent=1)
    dirs = [r["dir"] for _, r in sorted(race.results.items())]
    html = os.path.join(a.out, "race.html")
    rep = subprocess.run([a.mptrain, "report", *dirs, "-o", html, "--title", "Block race: GPT-2 vs Llama"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(rep.stdout.strip() if rep.returncode == 0 else f"report failed: {rep.stdout.strip()}")


def archive(race, folder):
    """Each run's validation records (the target, the curve and a sample of its step times) and its
    host.json under folder/<run>/: what the report needs, at ~7 KB a run."""
    for name, r in sorted(race.results.items()):
        dst = os.path.join(folder, name)
        os.makedirs(dst, exist_ok=True)
        with open(os.path.join(dst, "metrics.jsonl"), "w") as f:
            for rec in r["records"]:
                if "val_loss" in rec:
                    f.write(json.dumps(rec) + "\n")
        with open(os.path.join(dst, "host.json"), "w") as f:
            json.dump(r["host"], f)
    print(f"archived {len(race.results)} runs under {folder}")


def parse_bests(text):
    """{(family, optimizer): lr} from 'gpt2-adamw=1e-3,llama-adamw=2e-3'."""
    bests = {}
    for item in filter(None, text.split(",")):
        m = re.fullmatch(r"(\w+)-(\w+)=([0-9.eE+-]+)", item.strip())
        if not m or m.group(1) not in FAMILIES:
            sys.exit(f"block_race: --bests: '{item}' is not family-optimizer=lr (families: {', '.join(FAMILIES)})")
        bests[(m.group(1), m.group(2))] = float(m.group(3))
    return bests


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mptrain", default=os.path.join(REPO, "build", "mptrain"))
    ap.add_argument("--data", default=os.path.join(REPO, "data", "fortunes"),
                    help="the corpus folder; a glob takes several ('data/*': fortunes and perldoc, with --shuffle "
                         "interleaved)")
    ap.add_argument("--optimizers", default="adamw,muon")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--every", type=int, default=25, help="validate and log every N steps")
    ap.add_argument("--val-steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--adamw-lrs", default="5e-4,1e-3,2e-3")
    ap.add_argument("--muon-lrs", default="1e-3,2e-3,4e-3")
    ap.add_argument("--shuffle", action="store_true",
                    help="both families read the data shuffled (train --shuffle), not in order")
    ap.add_argument("--llama-flags", default="--qk-norm", help="the modern block's options")
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--max-extend", type=int, default=2)
    ap.add_argument("--target-minutes", type=float, default=10.0)
    ap.add_argument("--precision", default="bf16")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--target-loss", type=float, default=None,
                    help="the target validation loss, fixed (an earlier race's); default: GPT-2's best AdamW run "
                         "at --target-minutes")
    ap.add_argument("--bests", default="",
                    help="sweeps already made: family-optimizer=lr,... (gpt2-adamw=1e-3); their sweeps are skipped")
    ap.add_argument("--archive", default="", help="keep each run's validation records and host here (committable)")
    ap.add_argument("--deadline", default="", help="start no run that would end after this ISO time")
    ap.add_argument("--out", default=os.path.join(REPO, "runs", "block-race"))
    args = ap.parse_args()
    args.optimizers = args.optimizers.split(",")
    args.seeds = [int(s) for s in args.seeds.split(",")]
    os.makedirs(args.out, exist_ok=True)
    lrs = {"adamw": [float(x) for x in args.adamw_lrs.split(",")],
           "muon": [float(x) for x in args.muon_lrs.split(",")]}

    race = Race(args)
    bests = parse_bests(args.bests)
    # The baseline first: its best AdamW run sets the target.
    for optimizer in args.optimizers:
        for family in FAMILIES:
            if (family, optimizer) in bests:
                continue
            best = race.sweep(family, optimizer, lrs[optimizer])
            if best is not None:
                bests[(family, optimizer)] = best
    for (family, optimizer), lr in list(bests.items()):
        if optimizer in args.optimizers:
            for seed in args.seeds:  # a sweep's own seed is already done; a --bests one may not be
                race.run(family, optimizer, lr, seed)

    if args.target_loss is not None:
        report(race, bests, args.target_loss, "fixed by --target-loss")
    else:
        base = race.results.get(run_name("gpt2", "adamw", bests.get(("gpt2", "adamw"), 0), args.seeds[0]))
        if not base:
            sys.exit("block_race: no GPT-2 AdamW best, so no target")
        vals = [r for r in base["records"] if "val_loss" in r]
        at = next((r for r in vals if r.get("elapsed_s", 0) >= 60 * args.target_minutes), vals[-1])
        report(race, bests, at["val_loss"],
               f"gpt2 adamw lr {bests[('gpt2', 'adamw')]:g} at step {at['step']}, {at.get('elapsed_s', 0):.0f} s")
    if args.archive:
        archive(race, args.archive)


if __name__ == "__main__":
    main()
