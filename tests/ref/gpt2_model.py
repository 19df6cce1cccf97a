"""A plain PyTorch GPT-2, written from the OpenAI / Hugging Face definition.

This is mptrain's independent reference model: the C++ tests compare logits,
loss, gradients and AdamW trajectories against it (tests/ref/gpt2_reference.py),
and the benchmark peer (bench/pytorch_gpt2.py) times it.

Definition (GPT-2 as released by OpenAI, parameter layout of Hugging Face's
GPT2Model / model.safetensors, which has no ``transformer.`` prefix):

    x = wte[idx] + wpe[pos]
    for each block h.N:
        x = x + attn(ln_1(x))            # pre-LN, LayerNorm eps 1e-5
        x = x + mlp(ln_2(x))
    x = ln_f(x)
    logits = x @ wte.weight^T             # LM head tied to wte

    attn(x): qkv = c_attn(x) (fused, [C,3C], q|k|v along the output axis),
             split into n_head heads of HS = C / n_head,
             causal softmax(q k^T / sqrt(HS)) v, heads concatenated, c_proj.
    mlp(x):  c_proj(gelu_new(c_fc(x))), c_fc [C,4C], c_proj [4C,C],
             gelu_new(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).

Conv1D (HF): weight stored [in, out], y = x @ W + b (the transpose of nn.Linear).
Loss: mean cross-entropy over positions whose target != -1 (ignore_index=-1).
No dropout (reference runs are deterministic).

Parameter names, exactly as in HF files:
    wte.weight [V,C], wpe.weight [maxT,C],
    h.N.ln_1.{weight,bias} [C], h.N.attn.c_attn.{weight [C,3C], bias [3C]},
    h.N.attn.c_proj.{weight [C,C], bias [C]}, h.N.ln_2.{weight,bias} [C],
    h.N.mlp.c_fc.{weight [C,4C], bias [4C]}, h.N.mlp.c_proj.{weight [4C,C], bias [C]},
    ln_f.{weight,bias} [C].
GPT-2 124M (V=50257, maxT=1024, C=768, 12 layers): 124,439,808 parameters.

bf16 autocast on the CPU with torch 1.13 (checked on this machine, not taken
from the CUDA autocast lists): addmm/matmul/linear run in bf16; layer_norm keeps
fp32 for an fp32 input but RAISES for a bf16 input ("expected scalar type
BFloat16 but found Float"), so a bf16 LayerNorm input is cast ``.float()``
(_ln_input; in practice a no-op for GPT-2, whose residual stream stays fp32
because fp32 + bf16 promotes); softmax, masked_fill, tanh and gelu keep bf16 on the CPU
(unlike CUDA autocast, where softmax is forced to fp32); cross_entropy returns
fp32.  Only forward + loss go under autocast; parameters, gradients and AdamW
state stay fp32.
"""

import math
from collections import OrderedDict

import torch
import torch.nn as nn
import torch.nn.functional as F

GELU_C = math.sqrt(2.0 / math.pi)


class GPT2Config:
    """n_layer, n_head, n_embd, vocab_size (V, the real vocabulary), block_size (maxT)."""

    def __init__(self, n_layer=12, n_head=12, n_embd=768, vocab_size=50257,
                 block_size=1024, gelu="fused"):
        self.n_layer = int(n_layer)
        self.n_head = int(n_head)
        self.n_embd = int(n_embd)
        self.vocab_size = int(vocab_size)
        self.block_size = int(block_size)
        # "fused": F.gelu(approximate="tanh") (same formula, one ATen kernel);
        # "formula": the explicit gelu_new expression, op by op.
        self.gelu = gelu
        if self.n_embd % self.n_head != 0:
            raise ValueError(f"n_embd {self.n_embd} not divisible by n_head {self.n_head}")
        if gelu not in ("fused", "formula"):
            raise ValueError(f"gelu must be 'fused' or 'formula', not {gelu!r}")

    @staticmethod
    def coerce(config):
        if isinstance(config, GPT2Config):
            return config
        if isinstance(config, dict):
            keys = ("n_layer", "n_head", "n_embd", "vocab_size", "block_size", "gelu")
            return GPT2Config(**{k: config[k] for k in keys if k in config})
        return GPT2Config(**{k: getattr(config, k) for k in
                             ("n_layer", "n_head", "n_embd", "vocab_size", "block_size")})

    def __repr__(self):
        return (f"GPT2Config(n_layer={self.n_layer}, n_head={self.n_head}, n_embd={self.n_embd}, "
                f"vocab_size={self.vocab_size}, block_size={self.block_size}, gelu={self.gelu!r})")


def param_shapes(config):
    """Ordered {hf_name: shape} for a config, without building the model."""
    c = GPT2Config.coerce(config)
    C, V, T = c.n_embd, c.vocab_size, c.block_size
    s = OrderedDict()
    s["wte.weight"] = (V, C)
    s["wpe.weight"] = (T, C)
    for i in range(c.n_layer):
        p = f"h.{i}."
        s[p + "ln_1.weight"] = (C,)
        s[p + "ln_1.bias"] = (C,)
        s[p + "attn.c_attn.weight"] = (C, 3 * C)
        s[p + "attn.c_attn.bias"] = (3 * C,)
        s[p + "attn.c_proj.weight"] = (C, C)
        s[p + "attn.c_proj.bias"] = (C,)
        s[p + "ln_2.weight"] = (C,)
        s[p + "ln_2.bias"] = (C,)
        s[p + "mlp.c_fc.weight"] = (C, 4 * C)
        s[p + "mlp.c_fc.bias"] = (4 * C,)
        s[p + "mlp.c_proj.weight"] = (4 * C, C)
        s[p + "mlp.c_proj.bias"] = (C,)
    s["ln_f.weight"] = (C,)
    s["ln_f.bias"] = (C,)
    return s


def num_params(config):
    n = 0
    for shape in param_shapes(config).values():
        k = 1
        for d in shape:
            k *= d
        n += k
    return n


def gelu_new(x):
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), op by op."""
    return 0.5 * x * (1.0 + torch.tanh(GELU_C * (x + 0.044715 * torch.pow(x, 3.0))))


class Conv1D(nn.Module):
    """HF Conv1D: weight [nx, nf], y = x @ W + b."""

    def __init__(self, nx, nf):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        out_shape = x.shape[:-1] + (self.weight.shape[1],)
        y = torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight)
        return y.view(out_shape)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n_head = c.n_head
        self.n_embd = c.n_embd
        self.c_attn = Conv1D(c.n_embd, 3 * c.n_embd)
        self.c_proj = Conv1D(c.n_embd, c.n_embd)

    def forward(self, x):
        B, T, C = x.shape
        nh, hs = self.n_head, C // self.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, nh, hs).transpose(1, 2)  # [B, nh, T, hs]
        k = k.view(B, T, nh, hs).transpose(1, 2)
        v = v.view(B, T, nh, hs).transpose(1, 2)
        att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = torch.matmul(att, v)  # [B, nh, T, hs]
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = Conv1D(c.n_embd, 4 * c.n_embd)
        self.c_proj = Conv1D(4 * c.n_embd, c.n_embd)
        self.gelu = c.gelu

    def forward(self, x):
        h = self.c_fc(x)
        if self.gelu == "fused":
            h = F.gelu(h, approximate="tanh")
        else:
            h = gelu_new(h)
        return self.c_proj(h)


def _ln_input(x):
    """LayerNorm input: half-precision tensors go up to fp32 (torch 1.13 CPU autocast
    does not do it, see module doc); fp32 / fp64 pass through unchanged."""
    if x.dtype in (torch.bfloat16, torch.float16):
        return x.float()
    return x


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c.n_embd, eps=1e-5)
        self.attn = Attention(c)
        self.ln_2 = nn.LayerNorm(c.n_embd, eps=1e-5)
        self.mlp = MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(_ln_input(x)))
        x = x + self.mlp(self.ln_2(_ln_input(x)))
        return x


class GPT2(nn.Module):
    def __init__(self, config):
        super().__init__()
        c = GPT2Config.coerce(config)
        self.config = c
        self.wte = nn.Embedding(c.vocab_size, c.n_embd)
        self.wpe = nn.Embedding(c.block_size, c.n_embd)
        self.h = nn.ModuleList([Block(c) for _ in range(c.n_layer)])
        self.ln_f = nn.LayerNorm(c.n_embd, eps=1e-5)

    def forward(self, idx, targets=None):
        """idx: int [B,T] token ids; targets: int [B,T] or None (-1 = ignore).
        Returns (logits [B,T,V], loss or None)."""
        B, T = idx.shape
        if T > self.config.block_size:
            raise ValueError(f"sequence length {T} > block_size {self.config.block_size}")
        idx = idx.long()
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)[None, :, :]
        for block in self.h:
            x = block(x)
        x = self.ln_f(_ln_input(x))
        logits = F.linear(x, self.wte.weight)  # tied LM head
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(B * T, -1), targets.long().reshape(B * T),
                                   ignore_index=-1)
        return logits, loss


@torch.no_grad()
def init_weights(model, seed=None, std=0.02):
    """GPT-2 init: normal(0, 0.02) for embeddings and Conv1D weights, the residual
    projections (attn.c_proj, mlp.c_proj) scaled by 1/sqrt(2 n_layer); biases 0;
    LayerNorm weight 1, bias 0."""
    g = None
    if seed is not None:
        g = torch.Generator()
        g.manual_seed(int(seed))
    n_layer = model.config.n_layer
    for name, p in model.named_parameters():
        if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "ln_f.weight":
            p.fill_(1.0)
        elif name.endswith(".bias"):
            p.zero_()
        else:
            s = std
            if name.endswith("attn.c_proj.weight") or name.endswith("mlp.c_proj.weight"):
                s = std / math.sqrt(2 * n_layer)
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float32).to(p.dtype) * s)
    return model


def build_model(config, dtype=torch.float32, seed=None):
    """A GPT-2 for `config` (GPT2Config, dict or any object with the five fields),
    initialised the GPT-2 way."""
    model = GPT2(config)
    model.to(dtype)
    init_weights(model, seed=seed)
    return model


_IGNORED_ON_LOAD = (".attn.bias", ".attn.masked_bias")


def load_state(model, arrays, strict=True):
    """Copy {hf_name: numpy array (or tensor)} into the model's parameters.

    Accepts names with or without a ``transformer.`` prefix; ignores the
    ``h.N.attn.bias`` / ``h.N.attn.masked_bias`` causal-mask buffers of older HF
    files and a ``lm_head.weight`` (tied to wte). Other unknown names and, when
    `strict`, missing parameters or any shape mismatch raise KeyError/ValueError.
    Returns the list of names that were ignored."""
    params = dict(model.named_parameters())
    seen, ignored = set(), []
    for name, value in arrays.items():
        key = name[len("transformer."):] if name.startswith("transformer.") else name
        if key not in params:
            if key.endswith(_IGNORED_ON_LOAD) or key == "lm_head.weight":
                ignored.append(name)
                continue
            if strict:
                raise KeyError(f"load_state: unknown tensor {name!r}")
            ignored.append(name)
            continue
        p = params[key]
        t = value if isinstance(value, torch.Tensor) else torch.from_numpy(value.copy())
        if tuple(t.shape) != tuple(p.shape):
            raise ValueError(f"load_state: {name} has shape {tuple(t.shape)}, model wants {tuple(p.shape)}")
        with torch.no_grad():
            p.copy_(t.to(dtype=p.dtype, device=p.device))
        seen.add(key)
    missing = [n for n in params if n not in seen]
    if strict and missing:
        raise KeyError(f"load_state: missing parameters {missing[:8]}{'...' if len(missing) > 8 else ''}")
    return ignored


def decay_groups(model, weight_decay):
    """AdamW parameter groups: weight decay on parameters with dim >= 2 only
    (embeddings and Conv1D weights); none on biases and LayerNorm parameters."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return [{"params": decay, "weight_decay": float(weight_decay)},
            {"params": no_decay, "weight_decay": 0.0}]
