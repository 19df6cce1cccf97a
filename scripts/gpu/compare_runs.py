#!/usr/bin/env python3
"""A training run's trajectory, kept small enough to carry, and two trajectories compared.

The GPU plan's training comparisons (scripts/gpu/train_matrix.sh) run the CPU side on the build
machine (scripts/gpu/pack.sh) and carry only this summary of it to the GPU machine, whose window
is too short to run the CPU side again:

    compare_runs.py summarize RUN_DIR OUT.json
        the per-step train_loss and grad_norm of RUN_DIR/metrics.jsonl, and of the last
        checkpoint's model.safetensors each fp32 tensor's norm and 64 evenly spaced values
    compare_runs.py compare REF.json RUN_DIR --tol T [--first-step N]
        RUN_DIR against the reference: every step's loss within T (relative), its gradient norm
        within 3T, each final tensor finite and its norm within max(0.25, 10 T) (a tensor left
        un-updated or garbled). The sampled values' distance is printed, not judged: Adam's and
        Sophia's normalised steps turn a gradient that is zero in exact arithmetic (BERT's key
        biases, the key third of GPT-2's c_attn bias: softmax ignores a constant added to a row)
        into whole steps of rounding noise, different on each device. For the same reason a
        tensor whose whole gradient is zero in exact arithmetic (BERT's key biases: ZERO_GRADIENT)
        is only checked to be finite: on the H200 its norm was 2x the CPU's in every precision,
        all of it noise. Steps before N are not expected (a resumed run). Prints every step;
        exits 1 on a miss.

Pure Python (struct, json): the GPU machine's python3 may lack numpy.
"""
import json
import math
import os
import struct
import sys

SAMPLES = 64
# Tensors whose gradient is zero in exact arithmetic: a key bias adds q·b_k to every score of a
# query's row, which the softmax cancels. Their values are rounding noise that Adam normalises.
ZERO_GRADIENT = (".attention.self.key.bias",)


def trajectory(run_dir):
    steps = {}
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if "train_loss" in r:
                steps[int(r["step"])] = {"loss": r["train_loss"], "grad_norm": r.get("grad_norm")}
    return steps


def last_checkpoint(run_dir):
    names = sorted(d for d in os.listdir(run_dir) if d.startswith("step_"))
    if not names:
        raise SystemExit(f"compare_runs: no checkpoint in {run_dir}")
    return os.path.join(run_dir, names[-1], "model.safetensors")


def tensor_samples(path):
    """name -> {"norm", "values"} for every F32 tensor of a safetensors file."""
    out = {}
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        base = 8 + n
        for name, t in sorted(header.items()):
            if name == "__metadata__" or t["dtype"] != "F32":
                continue
            begin, end = t["data_offsets"]
            count = (end - begin) // 4
            f.seek(base + begin)
            data = struct.unpack(f"<{count}f", f.read(end - begin))
            picks = [data[(i * count) // SAMPLES] for i in range(min(SAMPLES, count))]
            out[name] = {"norm": math.sqrt(sum(x * x for x in data)), "values": picks}
    return out


def summarize(run_dir, out_path):
    summary = {"steps": trajectory(run_dir), "params": tensor_samples(last_checkpoint(run_dir))}
    with open(out_path, "w") as f:
        json.dump(summary, f)


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-12)


def compare(ref_path, run_dir, tol, first_step):
    with open(ref_path) as f:
        ref = json.load(f)
    ref_steps = {int(k): v for k, v in ref["steps"].items()}
    got = trajectory(run_dir)
    want = sorted(s for s in ref_steps if s >= first_step)
    misses = []
    if sorted(got) != want:
        misses.append(f"steps {sorted(got)} where the reference has {want}")
    for s in want:
        if s not in got:
            continue
        g, r = got[s], ref_steps[s]
        e_loss = rel(g["loss"], r["loss"]) if math.isfinite(g["loss"]) else math.inf
        e_norm = rel(g["grad_norm"], r["grad_norm"]) if g["grad_norm"] is not None else 0.0
        flag = "" if e_loss <= tol and e_norm <= 3 * tol else "  <-- MISS"
        print(f"  step {s:3d}  loss {g['loss']:.6f} ref {r['loss']:.6f} (rel {e_loss:.1e})  "
              f"grad_norm {g['grad_norm']} ref {r['grad_norm']} (rel {e_norm:.1e}){flag}")
        if flag:
            misses.append(f"step {s}")
    if "params" in ref and first_step <= 1:
        bound = max(0.25, 10 * tol)
        mine = tensor_samples(last_checkpoint(run_dir))
        worst_norm, worst_values = [], []
        for name, r in ref["params"].items():
            if name not in mine:
                misses.append(f"tensor {name} missing")
                continue
            m = mine[name]
            e_norm = rel(m["norm"], r["norm"]) if math.isfinite(m["norm"]) else math.inf
            if name.endswith(ZERO_GRADIENT):
                if not math.isfinite(m["norm"]):
                    misses.append(f"tensor {name} not finite")
                continue
            if e_norm > bound:
                misses.append(f"tensor {name} (norm {m['norm']:.6g}, reference {r['norm']:.6g})")
            num = sum((a - b) ** 2 for a, b in zip(m["values"], r["values"]))
            den = sum(b * b for b in r["values"])
            worst_norm.append((e_norm, name))
            worst_values.append((math.sqrt(num / den) if den > 0 else math.sqrt(num), name))
        for label, worst in (("norm rel", worst_norm), ("sampled values rel L2", worst_values)):
            worst.sort(reverse=True)
            print(f"  final parameters, worst {label}: " + ", ".join(f"{n} {e:.1e}" for e, n in worst[:3]))
    if misses:
        print("  MISS: " + "; ".join(misses))
        return 1
    return 0


def main(argv):
    if len(argv) >= 3 and argv[0] == "summarize":
        summarize(argv[1], argv[2])
        return 0
    if len(argv) >= 5 and argv[0] == "compare" and argv[3] == "--tol":
        first = int(argv[6]) if len(argv) >= 7 and argv[5] == "--first-step" else 1
        return compare(argv[1], argv[2], float(argv[4]), first)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
