#!/usr/bin/python3
"""PyTorch peer for `mptrain bench --model bert`: times full BERT pretraining steps.

    ATEN_CPU_CAPABILITY=avx512 /usr/bin/python3 bench/pytorch_bert.py --preset bert-base --batch 8 --seq 128 \\
        --steps 3 --warmup 1 --precision fp32|bf16 --threads 2 [--vocab 30522 --padded-vocab 30528]
    python3 bench/pytorch_bert.py --device cuda --compile --preset bert-base --batch 32 --seq 128 --precision bf16

The model is BertForPreTraining written here in plain torch (Debian's torch 1.13 has no
`transformers`), with mptrain's sizes and structure (src/model/bert.h): word / position /
token-type embeddings + LayerNorm (eps 1e-12); post-LN encoder layers (fused QKV projection,
bidirectional attention under the key padding mask, output projection, residual, LayerNorm;
FFN with exact erf GELU, residual, LayerNorm); pooler (tanh) + NSP classifier; MLM head
(dense, GELU, LayerNorm, decoder tied to the word embeddings + its own bias). No dropout (mptrain
has none). Like mptrain, the MLM head runs only on the masked positions (Hugging Face runs it on
every position and ignores all but those; the loss is the same). Loss = mean MLM cross-entropy
over the masked positions + mean NSP cross-entropy.

One step = zero grads, forward + loss, backward, clip_grad_norm_(1.0), AdamW (lr 1e-4, betas
0.9/0.95, eps 1e-8, weight decay 0.1 on parameters with dim >= 2, 0 on biases and LayerNorm),
as mptrain's train_step with AdamWHyper's defaults.

Synthetic instances, the recipe of src/bench/bench.h (same shapes and masked counts as mptrain;
the random draws themselves differ): row b holds T - (b mod 4)*(T//8) real tokens
[CLS] A [SEP] B [SEP] then [PAD]s, segment A the first (len-3)//2 content tokens, content ids
uniform in [999, V), max(1, floor(0.15*content + 0.5)) content positions replaced by [MASK]
with their original ids as labels, a random NSP label per row; fresh every step.

--precision bf16: torch.autocast("cpu", dtype=torch.bfloat16) around forward + loss only;
parameters, gradients and AdamW state stay fp32. torch 1.13's CPU autocast runs linear/matmul in
bf16 and refuses a bf16 LayerNorm input, so LayerNorm inputs are cast .float() (as
tests/ref/gpt2_model.py does).

--device cuda (the GPU peer of `mptrain bench --device cuda --model bert`): the same model and
batches on GPU 0, autocast("cuda", bf16), attention through scaled_dot_product_attention with the
key mask (torch 2's fused kernels), fused AdamW, and with --compile torch.compile around the
model: PyTorch's best recipe for this model, as bench/pytorch_gpt2_cuda.py is GPT-2's.

Output: human-readable lines per step, then ONE line
  RESULT ms_per_step=<median of timed steps> tokens_per_s=<B*T/median> ... peak_rss_mb=<ru_maxrss>
Environment notes go to stderr.
"""

import argparse
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_peer_step  # bench/, this script's folder

PRESETS = {  # n_layer, hidden (heads = hidden/64, FFN = 4*hidden), as mptrain's bert_preset
    "bert-base": (12, 768), "bert-large": (24, 1024), "bert-tiny": (2, 128), "bert-mini": (4, 256),
    "bert-small": (4, 512), "bert-medium": (8, 512),
}
PAD, CLS, SEP, MASK, FIRST_WORD = 0, 101, 102, 103, 999
MAX_POSITION, TYPE_VOCAB, LN_EPS, INIT_STD = 512, 2, 1e-12, 0.02


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def ln_in(x):
    """LayerNorm input in fp32 (torch 1.13's CPU autocast raises on a bf16 one)."""
    return x.float() if x.dtype != torch.float32 else x


class Layer(nn.Module):
    def __init__(self, c, n_head):
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(c, 3 * c)
        self.att_out = nn.Linear(c, c)
        self.ln1 = nn.LayerNorm(c, eps=LN_EPS)
        self.fc = nn.Linear(c, 4 * c)
        self.fc_out = nn.Linear(4 * c, c)
        self.ln2 = nn.LayerNorm(c, eps=LN_EPS)

    def forward(self, x, key_bias):
        B, T, C = x.shape
        hs = C // self.n_head
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.reshape(B, T, self.n_head, hs).transpose(1, 2) for t in (q, k, v))
        if x.is_cuda:  # torch 2's fused attention (the key mask as an additive bias)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=key_bias.to(q.dtype))
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs)) + key_bias  # [B, H, T, T]
            y = att.softmax(dim=-1) @ v
        y = y.transpose(1, 2).reshape(B, T, C)
        x = self.ln1(ln_in(x + self.att_out(y)))
        h = F.gelu(self.fc(x))  # exact erf GELU
        return self.ln2(ln_in(x + self.fc_out(h)))


class BertForPreTraining(nn.Module):
    def __init__(self, n_layer, c, padded_vocab):
        super().__init__()
        self.word = nn.Embedding(padded_vocab, c, padding_idx=PAD)
        self.pos = nn.Embedding(MAX_POSITION, c)
        self.tok_type = nn.Embedding(TYPE_VOCAB, c)
        self.emb_ln = nn.LayerNorm(c, eps=LN_EPS)
        self.layers = nn.ModuleList(Layer(c, c // 64) for _ in range(n_layer))
        self.pool = nn.Linear(c, c)
        self.nsp = nn.Linear(c, 2)
        self.mlm_dense = nn.Linear(c, c)
        self.mlm_ln = nn.LayerNorm(c, eps=LN_EPS)
        self.mlm_bias = nn.Parameter(torch.zeros(padded_vocab))  # the decoder's weight is self.word.weight
        for m in self.modules():  # Hugging Face's _init_weights
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, INIT_STD)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)
        with torch.no_grad():
            self.word.weight[PAD].zero_()

    def forward(self, tokens, types, attn_mask, mlm_pos, mlm_labels, nsp_labels):
        B, T = tokens.shape
        pos = torch.arange(T, device=tokens.device)
        x = self.emb_ln(self.word(tokens) + self.pos(pos)[None] + self.tok_type(types))
        key_bias = ((1.0 - attn_mask.float()) * -1e9)[:, None, None, :]  # padded keys out
        for layer in self.layers:
            x = layer(x, key_bias)
        nsp_logits = self.nsp(torch.tanh(self.pool(x[:, 0])))
        h = x.reshape(B * T, -1)[mlm_pos]  # the masked positions only, as mptrain
        h = self.mlm_ln(ln_in(F.gelu(self.mlm_dense(h))))
        mlm_logits = F.linear(h, self.word.weight, self.mlm_bias)
        loss = F.cross_entropy(mlm_logits.float(), mlm_labels) + F.cross_entropy(nsp_logits.float(), nsp_labels)
        return mlm_logits, loss


def decay_groups(model, wd):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return [{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}]


def make_batch(B, T, vocab, gen):
    """One batch of the synthetic recipe (module docstring)."""
    tokens = torch.zeros(B, T, dtype=torch.long)
    types = torch.zeros(B, T, dtype=torch.long)
    mask = torch.zeros(B, T, dtype=torch.long)
    labels = torch.full((B, T), -1, dtype=torch.long)
    first = min(FIRST_WORD, vocab // 2)
    for b in range(B):
        n = T - (b % 4) * (T // 8)
        a_len = (n - 3) // 2
        tokens[b, :n] = torch.randint(first, vocab, (n,), generator=gen)
        tokens[b, 0], tokens[b, a_len + 1], tokens[b, n - 1] = CLS, SEP, SEP
        types[b, a_len + 2:n] = 1
        mask[b, :n] = 1
        content = torch.tensor([t for t in range(1, n - 1) if t != a_len + 1])
        n_mask = max(1, int(0.15 * (n - 3) + 0.5))
        chosen = content[torch.randperm(len(content), generator=gen)[:n_mask]]
        labels[b, chosen] = tokens[b, chosen]
        tokens[b, chosen] = MASK
    nsp = torch.randint(0, 2, (B,), generator=gen)
    flat = labels.reshape(-1)
    pos = (flat != -1).nonzero().squeeze(1)  # row-major (b, t) order, as mptrain
    return tokens, types, mask, pos, flat[pos], nsp


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="bert-base", choices=sorted(PRESETS))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--precision", default="fp32", choices=("fp32", "bf16"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=30522, help="real vocabulary (token ids drawn below it)")
    ap.add_argument("--padded-vocab", type=int, default=0, help="embedding / decoder rows (default: --vocab)")
    ap.add_argument("--clip", type=float, default=1.0, help="grad-norm clip before AdamW (0 = off)")
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (torch 2, --device cuda)")
    a = ap.parse_args(argv)
    if a.steps <= 0 or a.warmup < 0:
        ap.error("--steps must be > 0 and --warmup >= 0")
    if not 8 <= a.seq <= MAX_POSITION:
        ap.error(f"--seq must be in 8..{MAX_POSITION}")
    padded = a.padded_vocab or a.vocab
    if padded < a.vocab or a.vocab <= MASK:
        ap.error("need --vocab > 103 and --padded-vocab >= --vocab")

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    cap = os.environ.get("ATEN_CPU_CAPABILITY")
    log(f"torch {torch.__version__}, {torch.get_num_threads()} threads, ATEN_CPU_CAPABILITY={cap or '(unset)'}")

    n_layer, hidden = PRESETS[a.preset]
    cuda = a.device == "cuda"
    if cuda and not torch.cuda.is_available():
        ap.error("--device cuda: no CUDA GPU visible to torch")
    model = BertForPreTraining(n_layer, hidden, padded).to(a.device)
    model.train()
    n_params = sum(p.numel() for p in model.parameters())
    fused = {"fused": True} if cuda else {}
    opt = torch.optim.AdamW(decay_groups(model, 0.1), lr=a.lr, betas=(0.9, 0.95), eps=1e-8, **fused)
    run = torch.compile(model) if a.compile else model
    params = list(model.parameters())
    B, T = a.batch, a.seq
    gen = torch.Generator()
    gen.manual_seed(a.seed)
    bf16 = a.precision == "bf16"
    n_masked = sum(max(1, int(0.15 * (T - (b % 4) * (T // 8) - 3) + 0.5)) for b in range(B))
    print(f"pytorch: {a.preset} ({n_params} params, vocab {a.vocab} padded to {padded}), batch {B} x {T}, "
          f"{n_masked} masked, {a.precision}, {torch.get_num_threads()} threads, {a.warmup} warmup + {a.steps} "
          f"timed steps", flush=True)

    def step(s):
        # Drawn on the host and uploaded, outside the model work but timed, as mptrain's are.
        batch = [t.to(a.device) for t in make_batch(B, T, a.vocab, gen)]
        out_dtype, loss = torch_peer_step.train_step(lambda: run(*batch), opt, params, a.clip, bf16, a.device)
        if s == 0:
            log(f"torch: dtypes: mlm logits {out_dtype}, params {params[0].dtype}")
        return loss

    times = torch_peer_step.time_steps(step, a.warmup, a.steps)
    torch_peer_step.report(times, B * T, [("precision", a.precision), ("device", a.device),
                                          ("threads", torch.get_num_threads()),
                                          ("preset", a.preset), ("batch", B), ("seq", T), ("vocab", padded),
                                          ("masked", n_masked)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
