#!/usr/bin/python3
"""Independent PyTorch pretraining run on an mptrain BERT instance file, to tell a bug in
mptrain's BERT training from a ceiling of the data or recipe (docs/BERT.md, "NSP on fortunes").

    /usr/bin/python3 tests/ref/bert_nsp_train.py TRAIN.bert VAL.bert --preset bert-tiny \
        --batch 64 --steps 1000 --lr 3e-3 --warmup 30 --eval-every 250 [--threads 1]

Reads the instance files itself (layout: src/data/bert_instances.h), masks them itself with
create_pretraining_data's rules (15% of the non-special tokens, at most --max-predictions,
80% [MASK] / 10% random ordinary token / 10% unchanged, a fresh mask per batch), and trains
BertForPreTraining as tests/ref/bert_reference.py defines it (no dropout, as mptrain) with
torch.optim.AdamW (decay on all but biases and LayerNorm), linear warmup then cosine to
--min-lr-frac of the peak, gradient clipping at 1.0: mptrain's defaults. Prints held-out MLM
accuracy (and the most-frequent-token baseline) and NSP accuracy over the whole val file.
"""

import argparse
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import bert_reference  # noqa: E402

PRESETS = {"bert-tiny": (2, 2, 128), "bert-mini": (4, 4, 256), "bert-small": (4, 8, 512), "bert-medium": (8, 8, 512)}


def read_instances(path):
    b = open(path, "rb").read()
    if b[:8] != b"MPTBERTI":
        raise ValueError("%s is not an mptrain BERT instance file" % path)
    _ver, _hb, max_seq_len, vocab_size = struct.unpack_from("<IIII", b, 8)
    n, n_tok, vocab_bytes, _fp = struct.unpack_from("<QQQQ", b, 24)
    pad, _unk, cls, sep, mask = struct.unpack_from("<iiiii", b, 56)
    r8 = lambda x: (x + 7) // 8 * 8  # noqa: E731
    off = 256
    vocab = b[off:off + vocab_bytes].decode().split("\n")
    off += r8(vocab_bytes)
    offsets = np.frombuffer(b, np.uint64, n + 1, off).astype(np.int64)
    off += (n + 1) * 8
    nsp = np.frombuffer(b, np.uint8, n, off).astype(np.int64)
    off += r8(n)
    tokens = np.frombuffer(b, np.uint16, n_tok, off).astype(np.int64)
    inst = [tokens[offsets[i]:offsets[i + 1]] for i in range(n)]
    special = [i for i, w in enumerate(vocab[:vocab_size]) if w.startswith("[") and w.endswith("]")]
    return dict(inst=inst, nsp=nsp, T=max_seq_len, V=vocab_size, pad=pad, cls=cls, sep=sep, mask=mask,
                special=set(special))


def make_batch(d, idx, T, max_pred, rng):
    B = len(idx)
    ids = np.full((B, T), d["pad"], np.int64)
    types = np.zeros((B, T), np.int64)
    att = np.zeros((B, T), np.int64)
    labels = np.full((B, T), -1, np.int64)
    pool = d["pool"]
    for r, i in enumerate(idx):
        t = d["inst"][i]
        L = len(t)
        ids[r, :L] = t
        att[r, :L] = 1
        first_sep = int(np.nonzero(t == d["sep"])[0][0])
        types[r, first_sep + 1:L] = 1
        cand = np.nonzero((t != d["cls"]) & (t != d["sep"]))[0]
        k = min(max_pred, max(1, int(round(0.15 * len(cand)))))
        for p in rng.choice(cand, k, replace=False):
            labels[r, p] = t[p]
            u = rng.random()
            if u < 0.8:
                ids[r, p] = d["mask"]
            elif u < 0.9:
                ids[r, p] = pool[rng.integers(len(pool))]
    nsp = d["nsp"][idx]
    return tuple(torch.from_numpy(a) for a in (ids, types, att, labels, nsp))


def init_params(cfg, seed):
    g = torch.Generator().manual_seed(seed)
    P = {}
    for name, shape in bert_reference.expected_shapes(cfg).items():
        if name.endswith("LayerNorm.weight"):
            t = torch.ones(shape)
        elif len(shape) == 1:
            t = torch.zeros(shape)
        else:
            t = torch.randn(shape, generator=g) * 0.02
        P[name] = t
    P["bert.embeddings.word_embeddings.weight"][cfg["pad_token_id"]] = 0
    for t in P.values():
        t.requires_grad_(True)
    return P


def evaluate(P, cfg, d, B, max_pred, seed):
    rng = np.random.default_rng(seed)
    n = len(d["inst"]) // B * B
    mlm_ok = mlm_n = nsp_ok = 0
    nsp_loss = 0.0
    counts = np.zeros(cfg["vocab_size"], np.int64)
    with torch.no_grad():
        for s in range(0, n, B):
            batch = make_batch(d, np.arange(s, s + B), d["T"], max_pred, rng)
            _m, nl, logits, nsp_logits = bert_reference.bert_losses(P, cfg, batch)
            lab = batch[3].reshape(-1)
            lab = lab[lab != -1]
            mlm_ok += int((logits.argmax(-1) == lab).sum())
            mlm_n += len(lab)
            counts += np.bincount(lab.numpy(), minlength=cfg["vocab_size"])
            nsp_ok += int((nsp_logits.argmax(-1) == batch[4]).sum())
            nsp_loss += nl.item() * B
    return mlm_ok / mlm_n, counts.max() / mlm_n, nsp_ok / n, nsp_loss / n


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("train")
    ap.add_argument("val")
    ap.add_argument("--preset", default="bert-tiny", choices=sorted(PRESETS))
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--beta2", type=float, default=0.999)
    ap.add_argument("--max-predictions", type=int, default=5)
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    tr, va = read_instances(args.train), read_instances(args.val)
    for d in (tr, va):
        d["pool"] = np.array([i for i in range(d["V"]) if i not in d["special"]], np.int64)
    L, NH, C = PRESETS[args.preset]
    V = (tr["V"] + 127) // 128 * 128  # mptrain's --vocab-multiple 128 (padded rows are never targets)
    cfg = dict(n_layer=L, n_head=NH, hidden=C, intermediate=4 * C, vocab_size=V, max_position=512,
               type_vocab_size=2, pad_token_id=tr["pad"], ln_eps=1e-12)
    P = init_params(cfg, args.seed)
    no_decay = [p for n, p in P.items() if n.endswith(".bias") or "LayerNorm" in n]
    decay = [p for n, p in P.items() if not (n.endswith(".bias") or "LayerNorm" in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, args.beta2), eps=1e-8)

    def lr_at(step):  # step counts from 0
        if step < args.warmup:
            return args.lr * (step + 1) / args.warmup
        p = (step - args.warmup) / max(1, args.steps - args.warmup)
        lo = args.lr * args.min_lr_frac
        return lo + 0.5 * (args.lr - lo) * (1 + math.cos(math.pi * p))

    rng = np.random.default_rng(args.seed)
    order = rng.permutation(len(tr["inst"]))
    pos = 0
    t0 = time.time()
    nsp_ok = nsp_seen = 0
    print("torch %s, %s, %d train / %d val instances, T %d, V %d" %
          (torch.__version__, args.preset, len(tr["inst"]), len(va["inst"]), tr["T"], V), flush=True)
    for step in range(args.steps):
        if pos + args.batch > len(order):
            order, pos = rng.permutation(len(tr["inst"])), 0
        batch = make_batch(tr, order[pos:pos + args.batch], tr["T"], args.max_predictions, rng)
        pos += args.batch
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        opt.zero_grad()
        mlm, nsp, _, nsp_logits = bert_reference.bert_losses(P, cfg, batch)
        (mlm + nsp).backward()
        torch.nn.utils.clip_grad_norm_(list(P.values()), 1.0)
        opt.step()
        nsp_ok += int((nsp_logits.argmax(-1) == batch[4]).sum())
        nsp_seen += args.batch
        if (step + 1) % args.eval_every == 0 or step + 1 == args.steps:
            acc, base, nacc, nloss = evaluate(P, cfg, va, args.batch, args.max_predictions, 99)
            print("step %5d | %.0f s | train nsp acc %.3f | val mlm acc %.4f (most frequent %.4f) | "
                  "val nsp acc %.4f loss %.4f" % (step + 1, time.time() - t0, nsp_ok / nsp_seen, acc, base, nacc,
                                                  nloss), flush=True)
            nsp_ok = nsp_seen = 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
