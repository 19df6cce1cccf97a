#!/usr/bin/python3
"""Muon written from the algorithm in PyTorch (Debian's torch 1.13 has no torch.optim.Muon), for
mptrain's Muon reference test.

    /usr/bin/python3 tests/ref/muon_reference.py IN.safetensors OUT.safetensors [--threads 2]

Muon for the hidden matrices of GPT-2 (h.<l>.attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj
weights: Conv1D, stored [in, out]), AdamW (torch.optim.AdamW) for every other tensor, decay on
tensors with dim >= 2. Per step s, with g the given gradient after clip_grad_norm_(all, clip):
    B = mu*B + g;  U = g + mu*B (nesterov) or B
    O = NS5(U):  X = U / (||U||_F + 1e-7), transposed when rows > cols; 5 times
                 A = X @ X.T;  Bm = b*A + c*(A @ A);  X = a*X + Bm @ X     (a, b, c) = (3.4445, -4.7750, 2.0315)
    W *= 1 - lr*wd;  W -= lr * scale * O
    scale: original max(1, fan_out/fan_in)**0.5, match_rms_adamw 0.2*sqrt(max(fan_out, fan_in))
c_attn is one matrix (qkv "one") or three [C, C] column blocks (qkv "three"). The AdamW group's
lr is lr*adamw_lr_ratio. ns_dtype "fp32" runs NS5 in fp32; "bf16" as torch.optim.Muon does
(X in bf16, every product and sum of the iteration in bf16).

IN (safetensors): every parameter (HF names and shapes, F32); grad.<s>.<name> F32 the gradient of
  step s; lrs F32 [steps]. __metadata__: steps momentum nesterov (0/1) ns_steps adjust qkv
  weight_decay beta1 beta2 eps adamw_lr_ratio grad_clip ns_dtype.
OUT: final.<name> F32, the parameters after the last step.
"""

import argparse
import os
import re
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import safetensors_np  # noqa: E402

HIDDEN = re.compile(r"^h\.\d+\.(attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj)\.weight$")
A, B, C = 3.4445, -4.7750, 2.0315


def newton_schulz(u, steps, dtype):
    x = u.to(dtype)
    x = x / (x.norm() + 1e-7)
    tall = x.size(0) > x.size(1)
    if tall:
        x = x.T
    for _ in range(steps):
        a = x @ x.T
        bm = B * a + C * (a @ a)
        x = A * x + bm @ x
    if tall:
        x = x.T
    return x.float()


def lr_scale(fan_out, fan_in, adjust):
    if adjust == "original":
        return max(1.0, fan_out / fan_in) ** 0.5
    return 0.2 * (max(fan_out, fan_in) ** 0.5)


def blocks(name, w, qkv):
    """The matrices of a Conv1D weight [in, out]: (column slice, fan_out, fan_in)."""
    fan_in, fan_out = w.shape
    if name.endswith("c_attn.weight") and qkv == "three":
        c = fan_out // 3
        return [(slice(j * c, (j + 1) * c), c, fan_in) for j in range(3)]
    return [(slice(0, fan_out), fan_out, fan_in)]


def run(in_path, out_path, threads):
    torch.set_num_threads(threads)
    arrays, meta = safetensors_np.load(in_path)
    steps = int(meta["steps"])
    mu, nesterov, ns_steps = float(meta["momentum"]), meta["nesterov"] == "1", int(meta["ns_steps"])
    adjust, qkv, wd = meta["adjust"], meta["qkv"], float(meta["weight_decay"])
    ratio, clip = float(meta["adamw_lr_ratio"]), float(meta["grad_clip"])
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[meta["ns_dtype"]]
    lrs = arrays["lrs"].astype(np.float64)
    names = [n for n in arrays if not n.startswith("grad.") and n != "lrs"]
    params = {n: torch.nn.Parameter(torch.from_numpy(arrays[n].copy())) for n in names}
    hidden = [n for n in names if HIDDEN.match(n)]
    others = [n for n in names if n not in hidden]
    assert len(hidden) > 0 and len(hidden) % 4 == 0, hidden
    adamw = torch.optim.AdamW(
        [{"params": [params[n] for n in others if params[n].dim() >= 2], "weight_decay": wd},
         {"params": [params[n] for n in others if params[n].dim() < 2], "weight_decay": 0.0}],
        lr=float(lrs[0]) * ratio, betas=(float(meta["beta1"]), float(meta["beta2"])), eps=float(meta["eps"]))
    momentum = {n: torch.zeros_like(params[n]) for n in hidden}
    for s in range(steps):
        for n in names:
            params[n].grad = torch.from_numpy(arrays[f"grad.{s}.{n}"].copy())
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(list(params.values()), clip)
        lr = float(lrs[s])
        for group in adamw.param_groups:
            group["lr"] = lr * ratio
        adamw.step()
        with torch.no_grad():
            for n in hidden:
                w, g, buf = params[n], params[n].grad, momentum[n]
                buf.mul_(mu).add_(g)
                u = g + mu * buf if nesterov else buf
                w.mul_(1 - lr * wd)
                for cols, fan_out, fan_in in blocks(n, w, qkv):
                    o = newton_schulz(u[:, cols], ns_steps, dtype)
                    w[:, cols].add_(o, alpha=-lr * lr_scale(fan_out, fan_in, adjust))
    out = {f"final.{n}": p.detach().numpy().astype(np.float32) for n, p in params.items()}
    safetensors_np.save(out_path, out, {"torch": torch.__version__})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inp")
    ap.add_argument("out")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args(argv)
    run(a.inp, a.out, a.threads)


if __name__ == "__main__":
    main()
