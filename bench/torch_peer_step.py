"""The part every CPU PyTorch peer of `mptrain bench` shares (bench/pytorch_gpt2.py,
bench/pytorch_bert.py): one training step as mptrain's train_step takes it (zero grads, forward
+ loss under CPU bf16 autocast when asked, backward, clip_grad_norm_, AdamW), the timed loop
(median of the timed steps after the warm-up ones), and the summary + ONE machine-readable line

  RESULT ms_per_step=<median> tokens_per_s=<B*T/median> <the caller's key=value fields> peak_rss_mb=<..> torch=<version>

that src/bench/bench.cpp parses. Kept in one place so the peers time exactly the same thing.
"""

import resource
import statistics
import time

import torch


def train_step(forward, opt, params, clip, bf16, device="cpu"):
    """One optimizer step; forward() returns (output, loss). Returns (output dtype, loss value);
    the loss's .item() waits for a GPU's work, so each step's time is all of it."""
    opt.zero_grad(set_to_none=True)
    if bf16:
        with torch.autocast(device, dtype=torch.bfloat16):
            out, loss = forward()
    else:
        out, loss = forward()
    out_dtype = out.dtype
    del out
    loss.backward()
    if clip > 0:
        torch.nn.utils.clip_grad_norm_(params, clip)
    opt.step()
    return out_dtype, loss.item()


def time_steps(step, warmup, steps):
    """Runs warmup + steps calls of step(index) -> loss, printing each; returns the timed ms."""
    times = []
    for s in range(warmup + steps):
        t0 = time.perf_counter()
        loss = step(s)
        ms = (time.perf_counter() - t0) * 1e3
        warm = s < warmup
        print(f"  step {s + 1}{' (warmup)' if warm else ''}: {ms:.1f} ms (loss {loss:.4f})", flush=True)
        if not warm:
            times.append(ms)
    return times


def report(times, tokens_per_step, fields):
    """The summary line and the RESULT line; fields: ordered (key, value) pairs after tokens_per_s."""
    med = statistics.median(times)
    tps = tokens_per_step / (med / 1e3)
    print(f"pytorch: {med:.1f} ms/step | {tps:.0f} tok/s (median of {len(times)}; "
          f"min {min(times):.1f}, max {max(times):.1f})", flush=True)
    # Peak resident memory of this process (ru_maxrss is in KiB on Linux), as mptrain bench reports its own.
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    extra = " ".join(f"{k}={v}" for k, v in fields)
    print(f"RESULT ms_per_step={med:.3f} tokens_per_s={tps:.1f} {extra} peak_rss_mb={peak_mb:.1f} "
          f"torch={torch.__version__}", flush=True)
