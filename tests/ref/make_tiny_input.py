#!/usr/bin/python3
"""Write a small IN.safetensors for tests/ref/gpt2_reference.py.

    /usr/bin/python3 tests/ref/make_tiny_input.py OUT.safetensors [--n_layer 2 --n_head 2
        --n_embd 16 --vocab 37 --block 16 --batch 2 --seq 8 --steps 5 --seed 1234
        --lr 1e-3 --beta1 0.9 --beta2 0.95 --eps 1e-8 --weight_decay 0.1 --grad_clip 1.0
        --ignore 0.2]

Parameters: GPT-2 init (std 0.02, residual projections / sqrt(2 n_layer)), then
biases and LayerNorm weights/biases perturbed (normal, std 0.1 around their init)
so every gradient a test compares is non-trivial. `inputs` are uniform tokens in
[0, vocab); `targets` are the inputs shifted left by one (a random token at the
end) with a fraction `--ignore` set to -1 (never all of them).
"""

import argparse
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import gpt2_model  # noqa: E402


def make_input(n_layer=2, n_head=2, n_embd=16, vocab=37, block=16, batch=2, seq=8,
               steps=5, seed=1234, lr=1e-3, beta1=0.9, beta2=0.95, eps=1e-8,
               weight_decay=0.1, grad_clip=1.0, ignore=0.2, perturb=0.1):
    """Returns (tensors {name: np.ndarray}, metadata {str: str})."""
    if seq > block:
        raise ValueError("seq must be <= block")
    cfg = gpt2_model.GPT2Config(n_layer, n_head, n_embd, vocab, block)
    model = gpt2_model.build_model(cfg, seed=seed)
    rng = np.random.default_rng(seed)
    tensors = {}
    for name, p in model.named_parameters():
        a = p.detach().numpy().astype(np.float32)
        if a.ndim == 1 and perturb > 0:
            a = a + rng.normal(0.0, perturb, size=a.shape).astype(np.float32)
        tensors[name] = np.ascontiguousarray(a, dtype=np.float32)
    inputs = rng.integers(0, vocab, size=(batch, seq), dtype=np.int64)
    targets = np.concatenate([inputs[:, 1:], rng.integers(0, vocab, size=(batch, 1))], axis=1)
    if ignore > 0:
        drop = rng.random(size=targets.shape) < ignore
        drop.flat[0] = False  # at least one counted position
        targets = np.where(drop, -1, targets)
    tensors["inputs"] = inputs.astype(np.int32)
    tensors["targets"] = targets.astype(np.int32)
    meta = {
        "n_layer": str(n_layer), "n_head": str(n_head), "n_embd": str(n_embd),
        "vocab_size": str(vocab), "block_size": str(block),
        "lr": repr(float(lr)), "beta1": repr(float(beta1)), "beta2": repr(float(beta2)),
        "eps": repr(float(eps)), "weight_decay": repr(float(weight_decay)),
        "grad_clip": repr(float(grad_clip)), "steps": str(int(steps)),
    }
    return tensors, meta


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--n_layer", type=int, default=2)
    ap.add_argument("--n_head", type=int, default=2)
    ap.add_argument("--n_embd", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=37)
    ap.add_argument("--block", type=int, default=16)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=8)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.95)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--weight_decay", type=float, default=0.1)
    ap.add_argument("--grad_clip", type=float, default=1.0)
    ap.add_argument("--ignore", type=float, default=0.2, help="fraction of targets set to -1")
    a = ap.parse_args(argv)
    tensors, meta = make_input(a.n_layer, a.n_head, a.n_embd, a.vocab, a.block, a.batch, a.seq,
                               a.steps, a.seed, a.lr, a.beta1, a.beta2, a.eps, a.weight_decay,
                               a.grad_clip, a.ignore)
    import gpt2_reference
    gpt2_reference.st_save(a.out, tensors, meta)
    n = sum(v.size for k, v in tensors.items() if k not in ("inputs", "targets"))
    print(f"wrote {a.out}: {n} parameters, inputs {tensors['inputs'].shape}, "
          f"{int((tensors['targets'] != -1).sum())} counted targets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
