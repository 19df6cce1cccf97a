#!/usr/bin/python3
"""PyTorch peer for `mptrain bench`: times full GPT-2 training steps.

    ATEN_CPU_CAPABILITY=avx512 /usr/bin/python3 bench/pytorch_gpt2.py --preset gpt2 --batch 4 --seq 256 \\
        --steps 10 --warmup 2 --precision fp32|bf16 --threads 2 [--vocab 50304] [--compile]

Environment this peer needs to be fair (see docs / shared REFERENCE.md, "Measured on this machine"):
  * scripts/setup.sh must install python3-torch, python3-numpy and libopenblas0-openmp (Debian).
    Debian's torch 1.13 is built with BLAS_INFO=generic and calls whatever libblas.so.3 the
    alternatives system points at; without OpenBLAS that is the reference BLAS (~6 GFLOP/s).
  * The caller should set ATEN_CPU_CAPABILITY=avx512: ATen otherwise dispatches its own
    (non-GEMM) kernels to AVX2; AVX-512 is 5-10% faster on these CPUs. (mptrain bench does.)
  * torch.set_num_threads(--threads): torch defaults to 1 thread here.
  * Call it with /usr/bin/python3 (Debian's interpreter, which has torch).

One step = zero grads, forward + mean cross-entropy (F.cross_entropy, ATen's fused
log-softmax + NLL), backward, clip_grad_norm_(1.0) (as mptrain's train_step does;
--clip 0 turns it off), AdamW step (lr 1e-4, betas 0.9/0.95, eps 1e-8, weight decay
0.1 on parameters with dim >= 2 and 0 on biases/LayerNorm). Fresh random tokens
every step, uniform over the real vocabulary (50257); the model's vocabulary is
--vocab (the LM head and loss run over all of its rows, as nanoGPT does with 50304).

--precision bf16: torch.autocast("cpu", dtype=torch.bfloat16) around forward + loss
only; parameters, gradients and AdamW state stay fp32. What torch 1.13's CPU
autocast actually does (checked here; printed at startup): addmm/matmul in bf16
(oneDNN), LayerNorm kept fp32 (its input is the fp32 residual stream; a bf16 input
would raise, so the model casts such inputs .float()), softmax/GELU in bf16, logits
bf16, loss fp32.

--compile: torch.compile does not exist in torch 1.13; the flag is accepted and
reported (compile=unavailable), and the run is eager.

Output: human-readable lines per step, then ONE line
  RESULT ms_per_step=<median of timed steps> tokens_per_s=<B*T/median> precision=<..> threads=<..> [more key=value,
         among them peak_rss_mb=<the process's resident-memory high-water mark>]
BLAS / build information goes to stderr.
"""

import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "ref"))

import gpt2_model  # noqa: E402
import torch_peer_step  # noqa: E402  (bench/, this script's folder)

REAL_VOCAB = 50257
PRESETS = {  # n_layer, n_head, n_embd (the same table as mptrain's gpt2_preset)
    "gpt2": (12, 12, 768), "gpt2-medium": (24, 16, 1024), "gpt2-large": (36, 20, 1280),
    "gpt2-xl": (48, 25, 1600), "d2": (2, 2, 64), "d4": (4, 4, 256), "d6": (6, 6, 384),
    "d8": (8, 8, 512), "d12": (12, 12, 768),
}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def report_environment():
    cfg = torch.__config__.show()
    keep = [l.strip() for l in cfg.splitlines()
            if "BLAS_INFO" in l or "CPU capability" in l or "MKL-DNN" in l or "OpenMP" in l]
    for l in keep:
        # the Build settings line is long; keep only its BLAS/LAPACK part
        if l.startswith("- Build settings"):
            parts = [p.strip() for p in l.split(",") if "BLAS_INFO" in p or "LAPACK_INFO" in p]
            l = "- Build settings: " + ", ".join(p.replace("- Build settings: ", "") for p in parts)
        log("torch: " + l)
    # What libblas actually got loaded (Debian's alternatives decide it).
    a = torch.randn(64, 64)
    _ = a @ a
    libs = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                p = line.split()[-1]
                if any(s in p for s in ("blas", "lapack", "dnnl", "mkl", "gomp", "iomp")) and p.startswith("/"):
                    libs.add(p)
    except OSError:
        pass
    for p in sorted(libs):
        log("torch: loaded " + p)
    if not any("openblas" in p for p in libs):
        log("torch: WARNING: OpenBLAS not loaded (install libopenblas0-openmp); fp32 GEMMs "
            "will use the reference BLAS and the comparison is unfair")
    cap = os.environ.get("ATEN_CPU_CAPABILITY")
    log(f"torch: ATEN_CPU_CAPABILITY={cap if cap else '(unset: ATen picks AVX2; set avx512 for a fair peer)'}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="gpt2", choices=sorted(PRESETS))
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--precision", default="fp32", choices=("fp32", "bf16"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=REAL_VOCAB, help="model vocabulary (e.g. 50304, padded)")
    ap.add_argument("--block", type=int, default=1024, help="context length (wpe rows)")
    ap.add_argument("--clip", type=float, default=1.0, help="grad-norm clip before AdamW (0 = off)")
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--foreach", action="store_true",
                    help="AdamW foreach=True (multi-tensor path; no fused AdamW on CPU in 1.13)")
    ap.add_argument("--compile", action="store_true", help="torch.compile (unavailable in torch 1.13)")
    ap.add_argument("--seed", type=int, default=1337)
    a = ap.parse_args(argv)
    if a.steps <= 0 or a.warmup < 0:
        ap.error("--steps must be > 0 and --warmup >= 0")
    if a.seq > a.block:
        ap.error(f"--seq {a.seq} > context {a.block}")

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    log(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    report_environment()

    n_layer, n_head, n_embd = PRESETS[a.preset]
    cfg = gpt2_model.GPT2Config(n_layer, n_head, n_embd, a.vocab, a.block, gelu="fused")
    model = gpt2_model.build_model(cfg, seed=a.seed)
    model.train()
    n_params = sum(p.numel() for p in model.parameters())
    compile_state = "off"
    step_model = model
    if a.compile:
        if hasattr(torch, "compile"):
            step_model = torch.compile(model)
            compile_state = "on"
        else:
            compile_state = "unavailable"
            log(f"torch: --compile ignored: torch.compile does not exist in torch {torch.__version__}; running eager")

    opt = torch.optim.AdamW(gpt2_model.decay_groups(model, 0.1), lr=a.lr, betas=(0.9, 0.95), eps=1e-8,
                            foreach=bool(a.foreach))
    params = list(model.parameters())
    B, T = a.batch, a.seq
    tok_vocab = min(REAL_VOCAB, a.vocab)
    gen = torch.Generator()
    gen.manual_seed(a.seed)
    bf16 = a.precision == "bf16"

    print(f"pytorch: {a.preset} ({n_params} params, vocab {a.vocab}), batch {B} x {T}, {a.precision}, "
          f"{torch.get_num_threads()} threads, {a.warmup} warmup + {a.steps} timed steps", flush=True)

    def step(s):
        x = torch.randint(0, tok_vocab, (B, T), generator=gen)
        y = torch.randint(0, tok_vocab, (B, T), generator=gen)
        out_dtype, loss = torch_peer_step.train_step(lambda: step_model(x, y), opt, params, a.clip, bf16)
        if s == 0:
            log(f"torch: dtypes: logits {out_dtype}, params {params[0].dtype}")
        return loss

    times = torch_peer_step.time_steps(step, a.warmup, a.steps)
    torch_peer_step.report(times, B * T, [("precision", a.precision), ("threads", torch.get_num_threads()),
                                          ("preset", a.preset), ("batch", B), ("seq", T), ("vocab", a.vocab),
                                          ("compile", compile_state)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
