#!/usr/bin/python3
"""PyTorch CPU autocast reference for mptrain's mixed-precision GPT-2 (tests/precision).

    /usr/bin/python3 tests/ref/gpt2_autocast.py IN.safetensors OUT.safetensors [--threads 2]

IN: the same layout as gpt2_reference.py's (every parameter under its Hugging Face name, F32;
inputs/targets I32 [B,T]; metadata n_layer, n_head, n_embd, vocab_size, block_size).

OUT (all F32):
  fp32.loss [1], fp32.grad.<name>   plain fp32 forward + backward (the model of gpt2_model.py)
  bf16.loss [1], bf16.grad.<name>   forward + loss under torch.autocast("cpu", torch.bfloat16),
                                    backward outside it (the recipe users run); gradients land
                                    on the fp32 parameters
  fp16.loss, fp16.grad.<name>       the same with float16, only when this torch's CPU autocast
                                    accepts float16 (1.13 does not); metadata fp16 = "1" or "0"
What torch 1.13's CPU autocast does to GPT-2 (gpt2_model.py's docstring): linears and matmuls in
bf16 with fp32 accumulation, LayerNorm fp32, softmax and GELU in bf16, cross-entropy fp32.
"""

import argparse
import os
import sys
import warnings

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import gpt2_model  # noqa: E402
from gpt2_reference import MODEL_KEYS, config_from_meta, st_load, st_save  # noqa: E402


def grads_under(model, inputs, targets, dtype):
    """(loss, {name: grad}) with forward + loss under CPU autocast to dtype (None = fp32)."""
    model.zero_grad(set_to_none=True)
    if dtype is None:
        _, loss = model(inputs, targets)
    else:
        with torch.autocast("cpu", dtype=dtype):
            _, loss = model(inputs, targets)
    loss = loss.float()
    loss.backward()
    return loss.item(), {n: p.grad.detach().float().numpy().copy() for n, p in model.named_parameters()}


def fp16_autocast_works():
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with torch.autocast("cpu", dtype=torch.float16):
                y = torch.ones(2, 2) @ torch.ones(2, 2)
        return y.dtype == torch.float16
    except Exception:  # 1.13: "CPU Autocast only supports dtype of torch.bfloat16"
        return False


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("inp")
    ap.add_argument("out")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    tensors, meta = st_load(a.inp)
    cfg = config_from_meta(meta, tensors)
    model = gpt2_model.GPT2(cfg)
    gpt2_model.load_state(model, {k: v for k, v in tensors.items() if k not in ("inputs", "targets")})
    inputs = torch.from_numpy(np.asarray(tensors["inputs"]).astype(np.int64))
    targets = torch.from_numpy(np.asarray(tensors["targets"]).astype(np.int64))

    out = {}
    modes = [("fp32", None), ("bf16", torch.bfloat16)]
    fp16 = fp16_autocast_works()
    if fp16:
        modes.append(("fp16", torch.float16))
    for tag, dtype in modes:
        loss, grads = grads_under(model, inputs, targets, dtype)
        if not np.isfinite(loss):
            raise SystemExit(f"{tag}: non-finite loss {loss}")
        out[tag + ".loss"] = np.array([loss], dtype=np.float32)
        for n, g in grads.items():
            out[f"{tag}.grad.{n}"] = np.ascontiguousarray(g, dtype=np.float32)
    ometa = {k: str(getattr(cfg, k)) for k in MODEL_KEYS}
    ometa.update({"torch": torch.__version__, "fp16": "1" if fp16 else "0"})
    st_save(a.out, out, ometa)


if __name__ == "__main__":
    main(sys.argv[1:])
