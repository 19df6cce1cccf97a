#!/usr/bin/python3
"""Independent PyTorch reference for mptrain's Llama tests (issue 40), written from the
architecture (Llama / LlamaForCausalLM as Hugging Face names it), not from any implementation:

    /usr/bin/python3 tests/ref/llama_reference.py IN.safetensors OUT.safetensors

Needs Debian's python3-torch and python3-numpy, i.e. /usr/bin/python3.

IN (safetensors): every parameter under its Hugging Face name, F32, model.embed_tokens.weight
(and lm_head.weight, absent when tied) [V, C] with the real vocabulary;
  inputs  I32 [B,T]  token ids in [0,V)
  targets I32 [B,T]  ids in [0,V), or -1 = ignored
  __metadata__: n_layer, n_head, n_kv_head, n_embd, intermediate, vocab_size, rope_theta,
  rms_eps, tie ("1"/"0"), and optionally qk_norm ("1": self_attn.q_norm / k_norm weights [HS])
  and mlp ("relu2": modded-nanogpt's un-gated MLP, up_proj and down_proj only).

OUT (F32): logits [B,T,V], loss [1] (mean cross-entropy over targets != -1), grad.<name> for
every parameter (the tied table: lookup + head).

The model, per block: h = x + o(attn(rope(q(n1(x))), rope(k(n1(x))), v(n1(x)))), out = h +
down(silu(gate(n2(h))) * up(n2(h))), n = RMSNorm (x * rsqrt(mean(x^2) + eps) * weight, in fp32);
rope turns channel pairs (i, i + HS/2) of each q and k head by t * theta^(-2i/HS) (the angles in
fp32: inv_freq = 1 / theta^(arange(0, HS, 2) / HS)); key/value head j serves query heads
j * NH/KV .. (j + 1) * NH/KV - 1; causal softmax(q k^T / sqrt(HS)) v; then RMSNorm and the head.
QK-norm (Qwen3's and OLMo-style per-head form) is an RMSNorm over each q and k head's HS channels,
one weight [HS] for all q heads and one for all k heads, before the rotation. ReLU²: out = h +
down(relu(up(n2(h)))^2).
"""

import math
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import safetensors_np  # noqa: E402

KEYS = ("n_layer", "n_head", "n_kv_head", "n_embd", "intermediate", "vocab_size")


def rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rotate(x, cos, sin):
    """x [B, H, T, HS]: each half-pair (i, i + HS/2) turned by the angle of its position."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    turned = torch.cat((-x2, x1), dim=-1)
    return x * cos + turned * sin


def angles(T, HS, theta):
    inv_freq = 1.0 / (theta ** (torch.arange(0, HS, 2, dtype=torch.float32) / HS))
    freqs = torch.arange(T, dtype=torch.float32)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)  # [T, HS]
    return emb.cos(), emb.sin()


def forward(p, cfg, inputs):
    L, NH, KV, C = cfg["n_layer"], cfg["n_head"], cfg["n_kv_head"], cfg["n_embd"]
    HS = C // NH
    B, T = inputs.shape
    eps, theta = cfg["rms_eps"], cfg["rope_theta"]
    cos, sin = angles(T, HS, theta)
    x = p["model.embed_tokens.weight"][inputs]  # [B, T, C]
    causal = torch.full((T, T), float("-inf")).triu(1)
    for l in range(L):
        pre = f"model.layers.{l}."
        h = rms_norm(x, p[pre + "input_layernorm.weight"], eps)
        q = (h @ p[pre + "self_attn.q_proj.weight"].T).view(B, T, NH, HS).transpose(1, 2)
        k = (h @ p[pre + "self_attn.k_proj.weight"].T).view(B, T, KV, HS).transpose(1, 2)
        v = (h @ p[pre + "self_attn.v_proj.weight"].T).view(B, T, KV, HS).transpose(1, 2)
        if cfg["qk_norm"]:
            q = rms_norm(q, p[pre + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, p[pre + "self_attn.k_norm.weight"], eps)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        k = k.repeat_interleave(NH // KV, dim=1)
        v = v.repeat_interleave(NH // KV, dim=1)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(HS) + causal, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ p[pre + "self_attn.o_proj.weight"].T
        h = rms_norm(x, p[pre + "post_attention_layernorm.weight"], eps)
        up = h @ p[pre + "mlp.up_proj.weight"].T
        if cfg["mlp"] == "relu2":
            a = torch.relu(up).square()
        else:
            a = torch.nn.functional.silu(h @ p[pre + "mlp.gate_proj.weight"].T) * up
        x = x + a @ p[pre + "mlp.down_proj.weight"].T
    x = rms_norm(x, p["model.norm.weight"], eps)
    head = p["model.embed_tokens.weight"] if cfg["tie"] else p["lm_head.weight"]
    return x @ head.T


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    torch.set_num_threads(2)
    tensors, meta = safetensors_np.load(argv[1])
    cfg = {k: int(meta[k]) for k in KEYS}
    cfg["rope_theta"] = float(meta["rope_theta"])
    cfg["rms_eps"] = float(meta["rms_eps"])
    cfg["tie"] = meta["tie"] == "1"
    cfg["qk_norm"] = meta.get("qk_norm", "0") == "1"
    cfg["mlp"] = meta.get("mlp", "swiglu")
    inputs = torch.from_numpy(np.asarray(tensors.pop("inputs"), dtype=np.int64))
    targets = torch.from_numpy(np.asarray(tensors.pop("targets"), dtype=np.int64))
    params = {n: torch.tensor(np.asarray(a, dtype=np.float32), requires_grad=True) for n, a in tensors.items()}
    logits = forward(params, cfg, inputs)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, cfg["vocab_size"]), targets.reshape(-1),
                                             ignore_index=-1)
    loss.backward()
    out = {"logits": logits.detach().numpy().astype(np.float32),
           "loss": np.array([loss.item()], dtype=np.float32)}
    for n, t in params.items():
        out["grad." + n] = t.grad.numpy().astype(np.float32)
    safetensors_np.save(argv[2], out, {"torch": torch.__version__})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
