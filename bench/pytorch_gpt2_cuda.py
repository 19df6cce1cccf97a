#!/usr/bin/env python3
"""PyTorch GPU peer for mptrain's CUDA ladder (issue 8): times GPT-2 training steps on one GPU.

    python3 bench/pytorch_gpt2_cuda.py --batch 16 --seq 1024 --steps 10 --warmup 3 \\
        [--precision fp32|tf32|bf16] [--attn naive|flash] [--compile|--no-compile]
    python3 bench/pytorch_gpt2_cuda.py --ladder --batch 16 --seq 1024 --steps 10 --warmup 3
    python3 bench/pytorch_gpt2_cuda.py --batch 16,32,64      # one row per batch (OOM rows reported)
    python3 bench/pytorch_gpt2_cuda.py --batch 16 --profile 3   # + its kernels, by GPU time a step

--profile N runs N more steps of each row under torch.profiler and prints its GPU kernels with
their calls and milliseconds per step (the step's own time, kernel by kernel, to set beside
`mptrain bench --device cuda --profile`'s op table: where PyTorch's step is faster than ours).

The model is GPT-2 124M written compactly here (nn.Linear layout, fused QKV, pre-LN,
tanh GELU, tied LM head, vocabulary padded to 50304, no dropout) rather than imported
from tests/ref/gpt2_model.py: that reference materialises the causal mask and the T x T
score matrix by design (it is the CPU correctness oracle), so it cannot show the flash
attention step of the ladder.  The parameter count and FLOP count are those of
mptrain's `gpt2` preset (src/model/gpt2.cpp).

One step = zero grads; forward + mean cross-entropy over all B*T positions; backward;
clip_grad_norm_(1.0) (mptrain's train_step clips too; --clip 0 turns it off); AdamW
(lr 1e-4, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on 2-D weights only,
fused=True where torch has it).  The same random-token batch is used for every
step and every row.  Parameters, gradients and AdamW state are fp32 in every row;
"bf16" means torch.autocast(bfloat16) around forward + loss, as in the usual recipe.

Ladder rows (one process, same batch, each row a fresh model):
    fp32            fp32 matmuls (TF32 off), naive attention (mask + softmax + 2 bmm)
    tf32            TF32 matmuls allowed
    bf16            + bf16 autocast
    bf16+flash      + F.scaled_dot_product_attention(is_causal=True)
    bf16+flash+compile   + torch.compile(model)
Each row prints ms/step (median of --steps timed steps after --warmup), tokens/s,
MFU against the GPU's bf16 dense peak (table below, keyed by the device name),
peak allocated memory and the speed-up over the previous row, a JSON line and a
"RESULT key=value ..." line (what `mptrain bench --device cuda` reads when it runs this peer).

FLOPs per token (as gpt2_flops_per_token in src/model/gpt2.cpp):
    6 * (L*12*C^2 + V_pad*C) + 6*L*C*T      (matmul weights incl. the tied LM head;
                                              the attention term counts QK^T and AV)
Needs a CUDA GPU: without one it prints one error line and exits 2.
"""

import argparse
import json
import math
import statistics
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # a machine without PyTorch at all
    print(f"pytorch_gpt2_cuda: error: PyTorch is not importable ({e}); this peer needs PyTorch with CUDA",
          file=sys.stderr)
    sys.exit(2)

REAL_VOCAB = 50257
PADDED_VOCAB = 50304
PRESETS = {"gpt2": (12, 12, 768), "gpt2-medium": (24, 16, 1024), "d12": (12, 12, 768), "d4": (4, 4, 256)}

# bf16 dense (no sparsity) tensor-core peaks in TFLOP/s, from NVIDIA's datasheets.
# Matched in order against torch.cuda.get_device_name(); the first substring found wins.
BF16_PEAK_TFLOPS = [
    ("H100 PCIe", 756.0, "H100 PCIe"),
    ("H100 NVL", 835.0, "H100 NVL"),
    ("GH200", 989.0, "GH200"),
    ("H200", 989.0, "H200 SXM"),
    ("H100", 989.0, "H100 SXM"),  # "NVIDIA H100 80GB HBM3" is the SXM part
    ("H800", 989.0, "H800 SXM"),
    ("A100", 312.0, "A100"),
    ("L40S", 362.0, "L40S"),
    ("A10G", 70.0, "A10G"),
    ("L4", 121.0, "L4"),
]

LADDER = [  # name, precision, attention, compile
    ("fp32", "fp32", "naive", False),
    ("tf32", "tf32", "naive", False),
    ("bf16", "bf16", "naive", False),
    ("bf16+flash", "bf16", "flash", False),
    ("bf16+flash+compile", "bf16", "flash", True),
]


def die(msg, code=2):
    print(f"pytorch_gpt2_cuda: error: {msg}", file=sys.stderr, flush=True)
    sys.exit(code)


def bf16_peak(name):
    for key, tflops, label in BF16_PEAK_TFLOPS:
        if key in name:
            return tflops, label
    return None, None


def flops_per_token(n_layer, n_embd, vocab, T):
    matmul_params = n_layer * 12.0 * n_embd * n_embd + float(vocab) * n_embd
    return 6.0 * matmul_params + 6.0 * n_layer * n_embd * T


class Attention(nn.Module):
    def __init__(self, n_head, C, block, attn):
        super().__init__()
        self.n_head, self.attn = n_head, attn
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        if attn == "naive":
            # Built once (not per step) so the naive row times attention, not mask creation.
            self.register_buffer("causal", torch.ones(block, block, dtype=torch.bool).tril(), persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        if self.attn == "flash":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
            att = att.masked_fill(~self.causal[:T, :T], float("-inf"))
            y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, n_head, C, block, attn):
        super().__init__()
        self.ln_1 = nn.LayerNorm(C)
        self.attn = Attention(n_head, C, block, attn)
        self.ln_2 = nn.LayerNorm(C)
        self.c_fc = nn.Linear(C, 4 * C)
        self.c_proj = nn.Linear(4 * C, C)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, n_layer, n_head, C, vocab, block, attn):
        super().__init__()
        self.wte = nn.Embedding(vocab, C)
        self.wpe = nn.Embedding(block, C)
        self.h = nn.ModuleList(Block(n_head, C, block, attn) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as in GPT-2
        for name, p in self.named_parameters():
            if p.dim() == 2:
                # GPT-2 init; residual projections scaled by 1/sqrt(2L)
                std = 0.02 / math.sqrt(2 * n_layer) if name.endswith("c_proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        T = idx.shape[1]
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for blk in self.h:
            x = blk(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def set_matmul_precision(precision):
    tf32 = precision != "fp32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")


def make_optimizer(model, lr):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    kw = dict(lr=lr, betas=(0.9, 0.95), eps=1e-8)
    try:
        return torch.optim.AdamW(groups, fused=True, **kw), "fused"
    except (TypeError, RuntimeError, ValueError):
        return torch.optim.AdamW(groups, foreach=True, **kw), "foreach"


def run_row(a, name, precision, attn, compiled, B, x, y, ctx):
    """Builds a fresh model, times warmup + steps, returns the result dict (or an OOM dict)."""
    n_layer, n_head, C = PRESETS[a.preset]
    T = x.shape[1]
    torch.manual_seed(a.seed)
    set_matmul_precision(precision)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    result = {"row": name, "precision": precision, "attn": attn, "compile": compiled, "batch": B, "seq": T}
    model = opt = None
    try:
        model = GPT2(n_layer, n_head, C, a.vocab, a.block, attn).cuda()
        model.train()
        opt, opt_kind = make_optimizer(model, a.lr)
        fwd = torch.compile(model, dynamic=False) if compiled else model
        params = list(model.parameters())

        def step():
            opt.zero_grad(set_to_none=True)
            if precision == "bf16":
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = fwd(x, y)
            else:
                loss = fwd(x, y)
            loss.backward()
            if a.clip > 0:
                torch.nn.utils.clip_grad_norm_(params, a.clip)
            opt.step()
            return loss

        times = []
        t_first = None
        for s in range(a.warmup + a.steps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            loss = step()
            torch.cuda.synchronize()
            ms = (time.perf_counter() - t0) * 1e3
            if s == 0:
                t_first = ms
            if s >= a.warmup:
                times.append(ms)
        lossv = float(loss.item())
        if not math.isfinite(lossv):
            die(f"row {name}: loss is {lossv} (not finite)")
        if a.profile > 0:
            print_kernel_profile(step, a.profile, name)
    except torch.cuda.OutOfMemoryError:
        del model, opt
        torch.cuda.empty_cache()
        result["oom"] = True
        return result
    med = statistics.median(times)
    tps = B * T / (med / 1e3)
    fpt = flops_per_token(n_layer, C, a.vocab, T)
    result.update({
        "ms_per_step": round(med, 3), "ms_min": round(min(times), 3), "ms_max": round(max(times), 3),
        "first_step_ms": round(t_first, 1), "tokens_per_s": round(tps, 1),
        "tflops": round(fpt * tps / 1e12, 2),
        "mfu": round(fpt * tps / (ctx["peak"] * 1e12), 4) if ctx["peak"] else None,
        "peak_mem_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
        "loss": round(lossv, 4), "optimizer": opt_kind, "params": ctx["n_params"],
        "device": ctx["device"], "torch": torch.__version__,
    })
    del model, opt
    torch.cuda.empty_cache()
    return result


def print_kernel_profile(step, n, name, rows=30):
    """Runs n steps under torch.profiler; prints the GPU kernels by their time per step."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            step()
        torch.cuda.synchronize()

    def device_us(e):  # the attribute's name changed across torch releases
        for attr in ("self_device_time_total", "self_cuda_time_total"):
            if hasattr(e, attr):
                return getattr(e, attr)
        return 0.0

    events = [e for e in prof.key_averages() if device_us(e) > 0]
    events.sort(key=device_us, reverse=True)
    total = sum(device_us(e) for e in events)
    print(f"kernel profile ({name}): {n} steps, {total / 1e3 / n:.2f} ms of GPU kernels a step", flush=True)
    print(f"  {'ms/step':>8} {'share':>6} {'calls/step':>10}  kernel", flush=True)
    for e in events[:rows]:
        us = device_us(e)
        print(f"  {us / 1e3 / n:>8.3f} {100 * us / total:>5.1f}% {e.count / n:>10.1f}  {e.key[:110]}", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="gpt2", choices=sorted(PRESETS))
    ap.add_argument("--batch", default="16", help="batch size, or a comma list (one row each)")
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--precision", default="bf16", choices=("fp32", "tf32", "bf16"))
    ap.add_argument("--attn", default="flash", choices=("naive", "flash"),
                    help="flash = F.scaled_dot_product_attention(is_causal=True); naive = mask + softmax")
    ap.add_argument("--compile", dest="compile", action="store_true", default=True,
                    help="torch.compile the model (default)")
    ap.add_argument("--no-compile", dest="compile", action="store_false")
    ap.add_argument("--ladder", action="store_true", help="fp32 -> tf32 -> bf16 -> +flash -> +compile")
    ap.add_argument("--vocab", type=int, default=PADDED_VOCAB)
    ap.add_argument("--block", type=int, default=1024, help="context length (wpe rows)")
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="after timing, N steps under torch.profiler: the GPU kernels by time per step")
    a = ap.parse_args(argv)
    try:
        batches = [int(b) for b in a.batch.split(",")]
    except ValueError:
        ap.error(f"--batch {a.batch!r}: expected an integer or a comma list of integers")
    if any(b <= 0 for b in batches) or a.steps <= 0 or a.warmup < 0 or a.seq <= 0:
        ap.error("--batch and --steps must be > 0, --warmup >= 0, --seq > 0")
    if a.seq > a.block:
        ap.error(f"--seq {a.seq} > context {a.block}")
    if a.ladder and len(batches) != 1:
        ap.error("--ladder takes one --batch")

    if not torch.cuda.is_available():
        die(f"no CUDA GPU visible to PyTorch {torch.__version__} (torch.cuda.is_available() is False); "
            "this peer only runs on a GPU machine")
    if a.compile and not hasattr(torch, "compile"):
        die(f"torch.compile does not exist in torch {torch.__version__}; use --no-compile")
    if not hasattr(F, "scaled_dot_product_attention") and (a.ladder or a.attn == "flash"):
        die(f"F.scaled_dot_product_attention does not exist in torch {torch.__version__}; use --attn naive")

    dev = torch.cuda.get_device_name(0)
    peak, peak_label = bf16_peak(dev)
    n_layer, n_head, C = PRESETS[a.preset]
    n_params = sum(p.numel() for p in GPT2(n_layer, n_head, C, a.vocab, a.block, "flash").parameters())
    ctx = {"device": dev, "peak": peak, "n_params": n_params}
    print(f"device: {dev}; bf16 dense peak "
          + (f"{peak:.0f} TFLOP/s ({peak_label} datasheet)" if peak else "unknown (no MFU)")
          + f"; torch {torch.__version__}, CUDA {torch.version.cuda}", flush=True)
    print(f"model: {a.preset}, {n_params:,} params (vocab {a.vocab}), T={a.seq}; "
          f"{flops_per_token(n_layer, C, a.vocab, a.seq) / 1e9:.3f} GFLOP/token; "
          f"{a.warmup} warmup + {a.steps} timed steps, median", flush=True)

    if a.ladder:
        rows = [(n, p, at, c, batches[0]) for n, p, at, c in LADDER]
    else:
        name = a.precision + ("+flash" if a.attn == "flash" else "") + ("+compile" if a.compile else "")
        rows = [(name, a.precision, a.attn, a.compile, b) for b in batches]

    gen = torch.Generator(device="cuda")
    gen.manual_seed(a.seed)
    inputs = {}
    hdr = (f"{'row':<20} {'B':>3} {'ms/step':>9} {'tok/s':>10} {'TFLOP/s':>8} {'MFU':>6} "
           f"{'mem GiB':>8} {'speed-up':>8} {'1st step s':>10}")
    print(hdr, flush=True)
    prev = None
    results = []
    for name, precision, attn, compiled, B in rows:
        if B not in inputs:
            tok = min(REAL_VOCAB, a.vocab)
            inputs[B] = (torch.randint(0, tok, (B, a.seq), device="cuda", generator=gen),
                         torch.randint(0, tok, (B, a.seq), device="cuda", generator=gen))
        x, y = inputs[B]
        r = run_row(a, name, precision, attn, compiled, B, x, y, ctx)
        if r.get("oom"):
            print(f"{name:<20} {B:>3} {'out of memory':>9}", flush=True)
            print(json.dumps(r), flush=True)
            continue
        speed = (prev / r["ms_per_step"]) if (a.ladder and prev) else None
        r["speedup_vs_prev"] = round(speed, 3) if speed else None
        mfu = f"{100 * r['mfu']:.1f}%" if r["mfu"] is not None else "-"
        print(f"{name:<20} {B:>3} {r['ms_per_step']:>9.1f} {r['tokens_per_s']:>10.0f} {r['tflops']:>8.1f} "
              f"{mfu:>6} {r['peak_mem_gib']:>8.2f} {(f'{speed:.2f}x' if speed else '-'):>8} "
              f"{r['first_step_ms'] / 1e3:>10.1f}", flush=True)
        print(json.dumps(r), flush=True)
        # The line `mptrain bench --device cuda` parses (bench/child_result.h), one per row.
        print(f"RESULT row={name} ms_per_step={r['ms_per_step']} tokens_per_s={r['tokens_per_s']} "
              f"tflops={r['tflops']} peak_mem_gib={r['peak_mem_gib']}", flush=True)
        prev = r["ms_per_step"]
        results.append(r)
    return 0 if results else 1


if __name__ == "__main__":
    sys.exit(main())
