#!/usr/bin/python3
"""PyTorch transcription of Sophia-G (Liu et al. 2023; the authors' sophia.py SophiaG and
train_sophiag.py Hessian step) for mptrain's Sophia reference test.

    /usr/bin/python3 tests/ref/sophia_reference.py IN.safetensors OUT.safetensors [--threads 2]

Needs Debian's python3-torch and python3-numpy (i.e. /usr/bin/python3); reuses
tests/ref/gpt2_model.py (the model) and tests/ref/safetensors_np.py (file I/O).

The algorithm, per optimizer step t = 1..steps (0-based s = t - 1):
    g = gradient of the step's mean loss; clip_grad_norm_(params, grad_clip)
    for every parameter:  p *= 1 - lr*wd     (wd on parameters with dim >= 2 only)
                          m  = beta1*m + (1-beta1)*g
                          p += -lr * sign(m) * min(|m| / (rho*bs*h + 1e-15), 1)
    if t % k == 0 (the authors' iter_num % k == k-1):
        labels y ~ softmax(logits) on the step's batch; g^ = gradient of mean CE(logits, y)
        clip_grad_norm_(params, grad_clip);  h = beta2*h + (1-beta2)*g^*g^
bs = tokens per optimizer step; m and h start at zero; no bias correction.

The test feeds mptrain's gradients (and the labels mptrain sampled), so that both sides run
the optimizer on bit-identical inputs; this script also recomputes every gradient with its
own model at its own parameters and reports how far mptrain's are from them.

IN (safetensors):
  <name>                 every GPT-2 parameter (Hugging Face names/shapes, wte with V rows), F32
  inputs, targets        I32 [steps, B, T]: the batch of each step
  lrs                    F32 [steps]: the learning rate of each step
  grad.<s>.<name>        F32: mptrain's raw (unclipped) gradient at step s
  labels.<s>             I32 [B, T]: labels mptrain sampled for the Hessian estimate after step s
  hgrad.<s>.<name>       F32: mptrain's raw gradient of the mean loss on those labels
  __metadata__: n_layer n_head n_embd vocab_size block_size steps beta1 beta2 rho
                weight_decay k grad_clip tokens_per_step (strings)
OUT (safetensors, F32):
  final.<name>           parameters after the last step
  grad_err [steps]       max over tensors of ||mptrain's grad - ours|| / ||ours|| at step s
  hgrad_err [steps]      the same for the Hessian gradient (0 where no estimate)
  hess_loss [steps]      our mean loss on the sampled labels (0 where no estimate)
  win_rate [steps]       fraction of coordinates with |m| < rho*bs*h after the estimate (-1 where none)
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
import safetensors_np  # noqa: E402

MODEL_KEYS = ("n_layer", "n_head", "n_embd", "vocab_size", "block_size")


class SophiaG(torch.optim.Optimizer):
    """Sophia-G: decoupled weight decay, EMA momentum, and the element-wise clipped
    preconditioned step; update_hessian() folds the current .grad (squared) into h."""

    def __init__(self, params, lr, betas, rho, weight_decay):
        super().__init__(params, {"lr": lr, "betas": betas, "rho": rho, "weight_decay": weight_decay})

    def _state(self, p):
        st = self.state[p]
        if not st:
            st["exp_avg"] = torch.zeros_like(p)
            st["hessian"] = torch.zeros_like(p)
        return st

    @torch.no_grad()
    def update_hessian(self):
        for group in self.param_groups:
            beta2 = group["betas"][1]
            for p in group["params"]:
                if p.grad is not None:
                    self._state(p)["hessian"].mul_(beta2).addcmul_(p.grad, p.grad, value=1.0 - beta2)

    @torch.no_grad()
    def step(self, bs):
        for group in self.param_groups:
            beta1 = group["betas"][0]
            lr, rho, wd = group["lr"], group["rho"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                st = self._state(p)
                p.mul_(1.0 - lr * wd)
                m = st["exp_avg"]
                m.mul_(beta1).add_(p.grad, alpha=1.0 - beta1)
                ratio = (m.abs() / (rho * bs * st["hessian"] + 1e-15)).clamp(None, 1.0)
                p.addcmul_(m.sign(), ratio, value=-lr)

    @torch.no_grad()
    def win_rate(self, bs):
        hit, total = 0, 0
        for group in self.param_groups:
            for p in group["params"]:
                st = self._state(p)
                hit += int((st["exp_avg"].abs() < group["rho"] * bs * st["hessian"]).sum())
                total += p.numel()
        return hit / total


def rel_err(ours, theirs):
    d = np.linalg.norm((ours.astype(np.float64) - theirs.astype(np.float64)).ravel())
    n = np.linalg.norm(theirs.astype(np.float64).ravel())
    return d / n if n > 0 else d


def own_grads(model, idx, targets):
    """Our gradient of the mean CE over targets at the current parameters; returns (loss, {name: grad})."""
    model.zero_grad(set_to_none=True)
    _, loss = model(idx, targets)
    loss.backward()
    return float(loss), {n: p.grad.detach().numpy().copy() for n, p in model.named_parameters()}


def set_grads(model, arrays, prefix):
    for n, p in model.named_parameters():
        p.grad = torch.from_numpy(arrays[prefix + n].copy())


def run(in_path, out_path, threads):
    torch.set_num_threads(threads)
    arrays, meta = safetensors_np.load(in_path)
    cfg = gpt2_model.GPT2Config(**{k: int(meta[k]) for k in MODEL_KEYS})
    model = gpt2_model.build_model(cfg)
    gpt2_model.load_state(model, {n: arrays[n] for n, _ in model.named_parameters()})
    steps, k = int(meta["steps"]), int(meta["k"])
    beta1, beta2 = float(meta["beta1"]), float(meta["beta2"])
    rho, wd, clip = float(meta["rho"]), float(meta["weight_decay"]), float(meta["grad_clip"])
    bs = float(meta["tokens_per_step"])
    lrs = arrays["lrs"].astype(np.float64)
    groups = gpt2_model.decay_groups(model, wd)  # decay on dim >= 2 only
    opt = SophiaG(groups, lr=float(lrs[0]), betas=(beta1, beta2), rho=rho, weight_decay=0.0)
    params = list(model.parameters())
    grad_err = np.zeros(steps, np.float32)
    hgrad_err = np.zeros(steps, np.float32)
    hess_loss = np.zeros(steps, np.float32)
    win = np.full(steps, -1.0, np.float32)
    for s in range(steps):
        idx = torch.from_numpy(arrays["inputs"][s].astype(np.int64))
        tgt = torch.from_numpy(arrays["targets"][s].astype(np.int64))
        _, mine = own_grads(model, idx, tgt)
        grad_err[s] = max(rel_err(arrays[f"grad.{s}.{n}"], g) for n, g in mine.items())
        set_grads(model, arrays, f"grad.{s}.")  # the optimizer runs on mptrain's exact gradient
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(params, clip)
        for group in opt.param_groups:
            group["lr"] = float(lrs[s])
        opt.step(bs=bs)
        if (s + 1) % k == 0:
            labels = torch.from_numpy(arrays[f"labels.{s}"].astype(np.int64))
            hess_loss[s], mine = own_grads(model, idx, labels)
            hgrad_err[s] = max(rel_err(arrays[f"hgrad.{s}.{n}"], g) for n, g in mine.items())
            set_grads(model, arrays, f"hgrad.{s}.")
            if clip > 0:
                torch.nn.utils.clip_grad_norm_(params, clip)
            opt.update_hessian()
            win[s] = opt.win_rate(bs)
        model.zero_grad(set_to_none=True)
    out = {f"final.{n}": p.detach().numpy().astype(np.float32) for n, p in model.named_parameters()}
    out.update({"grad_err": grad_err, "hgrad_err": hgrad_err, "hess_loss": hess_loss, "win_rate": win})
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
