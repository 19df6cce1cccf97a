#!/usr/bin/python3
"""Independent PyTorch reference for mptrain's BERT tests: BertForPreTraining as Hugging Face
defines it (modeling_bert.py), written from scratch on torch.nn.functional (transformers is
not installed here).

    /usr/bin/python3 tests/ref/bert_reference.py IN.safetensors OUT.safetensors [--threads 2]

Needs Debian's python3-torch (1.13) and python3-numpy, i.e. /usr/bin/python3.

IN (safetensors):
  every parameter under its Hugging Face BertForPreTraining name, F32, nn.Linear layout
  [out, in]; bert.embeddings.word_embeddings.weight [V, C] and cls.predictions.bias [V]
  (real vocabulary rows only); cls.predictions.decoder.weight is tied to the word embeddings
  and must be absent.
  input_ids [B,T] I32, token_type_ids [B,T] I32, attention_mask [B,T] I32 (1 real, 0 pad),
  mlm_labels [B,T] I32 (-1 = not masked), nsp_labels [B] I32 (0 IsNext, 1 NotNext)
  __metadata__: n_layer, n_head, hidden, intermediate, vocab_size, max_position,
  type_vocab_size, pad_token_id, ln_eps (required); steps (default 0) and, when > 0, lr,
  beta1, beta2, eps, weight_decay, grad_clip; autocast (optional): "bf16" adds the outputs below.

OUT (safetensors, F32):
  mlm_loss [1], nsp_loss [1], loss [1]     mean MLM CE over labels != -1, mean NSP CE, their sum
  mlm_logits [M, V]                        logits at the masked positions, row-major (b, t) order
  nsp_logits [B, 2]
  grad.<name>                              d loss / d param (word embeddings: input + tied decoder)
  losses [steps], final.<name>             when steps > 0: loss before each AdamW step, and the
                                           parameters after the last. AdamW (torch.optim, 1.13)
                                           with weight decay on every tensor except biases and
                                           LayerNorm parameters; clip_grad_norm_ first if grad_clip > 0.
  bf16.mlm_loss [1], bf16.nsp_loss [1],    when metadata autocast = "bf16": the same forward + losses
  bf16.grad.<name>                         under torch.autocast("cpu", torch.bfloat16), backward outside
                                           it (the recipe users run); gradients land on the fp32
                                           parameters. torch 1.13's CPU autocast runs F.linear and
                                           matmul in bf16 (fp32 accumulation), softmax and
                                           cross-entropy in fp32 (the scores are promoted by the fp32
                                           mask), GELU and tanh in their input's bf16, and does not
                                           cast LayerNorm inputs: the MLM transform's bf16 GELU output
                                           is widened with .float() before its LayerNorm (what
                                           autocast's fp32 layer_norm rule does on a GPU).
"""

import argparse
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import safetensors_np  # noqa: E402

INT_KEYS = ("n_layer", "n_head", "hidden", "intermediate", "vocab_size", "max_position", "type_vocab_size",
            "pad_token_id")
BATCH_KEYS = ("input_ids", "token_type_ids", "attention_mask", "mlm_labels", "nsp_labels")


def expected_shapes(cfg, nsp=True, num_labels=0):
    """BertForPreTraining's tensors (name -> shape), BertForMaskedLM's without nsp (no pooler,
    no cls.seq_relationship), or BertForSequenceClassification's with num_labels (the pooler and
    classifier, no cls.*)."""
    C, I, V = cfg["hidden"], cfg["intermediate"], cfg["vocab_size"]
    s = {
        "bert.embeddings.word_embeddings.weight": (V, C),
        "bert.embeddings.position_embeddings.weight": (cfg["max_position"], C),
        "bert.embeddings.token_type_embeddings.weight": (cfg["type_vocab_size"], C),
        "bert.embeddings.LayerNorm.weight": (C,),
        "bert.embeddings.LayerNorm.bias": (C,),
    }
    for l in range(cfg["n_layer"]):
        p = "bert.encoder.layer.%d." % l
        for n in ("query", "key", "value"):
            s[p + "attention.self.%s.weight" % n] = (C, C)
            s[p + "attention.self.%s.bias" % n] = (C,)
        s[p + "attention.output.dense.weight"] = (C, C)
        s[p + "attention.output.dense.bias"] = (C,)
        s[p + "attention.output.LayerNorm.weight"] = (C,)
        s[p + "attention.output.LayerNorm.bias"] = (C,)
        s[p + "intermediate.dense.weight"] = (I, C)
        s[p + "intermediate.dense.bias"] = (I,)
        s[p + "output.dense.weight"] = (C, I)
        s[p + "output.dense.bias"] = (C,)
        s[p + "output.LayerNorm.weight"] = (C,)
        s[p + "output.LayerNorm.bias"] = (C,)
    if nsp or num_labels:
        s["bert.pooler.dense.weight"] = (C, C)
        s["bert.pooler.dense.bias"] = (C,)
    if num_labels:
        s["classifier.weight"] = (num_labels, C)
        s["classifier.bias"] = (num_labels,)
        return s
    s["cls.predictions.transform.dense.weight"] = (C, C)
    s["cls.predictions.transform.dense.bias"] = (C,)
    s["cls.predictions.transform.LayerNorm.weight"] = (C,)
    s["cls.predictions.transform.LayerNorm.bias"] = (C,)
    s["cls.predictions.bias"] = (V,)
    if nsp:
        s["cls.seq_relationship.weight"] = (2, C)
        s["cls.seq_relationship.bias"] = (2,)
    return s


def bert_losses(P, cfg, batch):
    """BertForPreTraining forward: returns (mlm_loss, nsp_loss, mlm_logits at masked rows, nsp_logits).
    Without the pooler in P (BertForMaskedLM) nsp_loss is 0 and nsp_logits is empty."""
    ids, types, mask, mlm_labels, nsp_labels = batch
    B, T = ids.shape
    C, NH, eps = cfg["hidden"], cfg["n_head"], cfg["ln_eps"]
    HS = C // NH
    word = P["bert.embeddings.word_embeddings.weight"]
    # BertEmbeddings: word (padding_idx = pad_token_id: that row gets no gradient) + type + position.
    x = F.embedding(ids, word, padding_idx=cfg["pad_token_id"])
    x = x + F.embedding(types, P["bert.embeddings.token_type_embeddings.weight"])
    x = x + P["bert.embeddings.position_embeddings.weight"][:T].unsqueeze(0)
    x = F.layer_norm(x, (C,), P["bert.embeddings.LayerNorm.weight"], P["bert.embeddings.LayerNorm.bias"], eps)
    # get_extended_attention_mask: (1 - mask) * finfo.min, added to every head's scores.
    ext = (1.0 - mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min

    def heads(t):
        return t.view(B, T, NH, HS).permute(0, 2, 1, 3)

    for l in range(cfg["n_layer"]):
        p = "bert.encoder.layer.%d." % l
        q = heads(F.linear(x, P[p + "attention.self.query.weight"], P[p + "attention.self.query.bias"]))
        k = heads(F.linear(x, P[p + "attention.self.key.weight"], P[p + "attention.self.key.bias"]))
        v = heads(F.linear(x, P[p + "attention.self.value.weight"], P[p + "attention.self.value.bias"]))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(HS) + ext
        probs = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).reshape(B, T, C)
        a = F.linear(ctx, P[p + "attention.output.dense.weight"], P[p + "attention.output.dense.bias"])
        x = F.layer_norm(a + x, (C,), P[p + "attention.output.LayerNorm.weight"],
                         P[p + "attention.output.LayerNorm.bias"], eps)
        f = F.gelu(F.linear(x, P[p + "intermediate.dense.weight"], P[p + "intermediate.dense.bias"]))
        f = F.linear(f, P[p + "output.dense.weight"], P[p + "output.dense.bias"])
        x = F.layer_norm(f + x, (C,), P[p + "output.LayerNorm.weight"], P[p + "output.LayerNorm.bias"], eps)

    nsp_logits = torch.zeros(0, 2, dtype=x.dtype)
    if "bert.pooler.dense.weight" in P:
        # BertPooler, then cls.seq_relationship (NSP) or BertForSequenceClassification's classifier
        # (its dropout is the identity in eval).
        head = "classifier" if "classifier.weight" in P else "cls.seq_relationship"
        pooled = torch.tanh(F.linear(x[:, 0], P["bert.pooler.dense.weight"], P["bert.pooler.dense.bias"]))
        nsp_logits = F.linear(pooled, P[head + ".weight"], P[head + ".bias"])
    if "classifier.weight" in P:  # no MLM head
        return (torch.zeros(()), F.cross_entropy(nsp_logits, nsp_labels), torch.zeros(0, word.shape[0]),
                nsp_logits)
    t = F.gelu(F.linear(x, P["cls.predictions.transform.dense.weight"], P["cls.predictions.transform.dense.bias"]))
    t = F.layer_norm(t.float(), (C,), P["cls.predictions.transform.LayerNorm.weight"],
                     P["cls.predictions.transform.LayerNorm.bias"], eps)
    logits = F.linear(t, word, P["cls.predictions.bias"])  # decoder tied to the word embeddings
    V = word.shape[0]
    mlm_loss = F.cross_entropy(logits.reshape(-1, V), mlm_labels.reshape(-1), ignore_index=-1)
    nsp_loss = F.cross_entropy(nsp_logits, nsp_labels) if len(nsp_logits) else torch.zeros(())
    masked = mlm_labels.reshape(-1) != -1
    return mlm_loss, nsp_loss, logits.reshape(-1, V)[masked], nsp_logits


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("inp")
    ap.add_argument("out")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    tensors, meta = safetensors_np.load(args.inp)
    missing = [k for k in INT_KEYS + ("ln_eps",) if k not in meta]
    if missing:
        raise KeyError("IN metadata lacks %s" % missing)
    cfg = {k: int(meta[k]) for k in INT_KEYS}
    cfg["ln_eps"] = float(meta["ln_eps"])
    shapes = expected_shapes(cfg)
    for k in BATCH_KEYS:
        if k not in tensors:
            raise KeyError("IN lacks %s" % k)
    unknown = set(tensors) - set(shapes) - set(BATCH_KEYS)
    if unknown:
        raise KeyError("IN has unknown tensors %s" % sorted(unknown))
    P = {}
    for name, shape in shapes.items():
        if name not in tensors:
            raise KeyError("IN lacks parameter %s" % name)
        if tuple(tensors[name].shape) != shape:
            raise ValueError("%s is %s, expected %s" % (name, tensors[name].shape, shape))
        P[name] = torch.tensor(tensors[name], dtype=torch.float32, requires_grad=True)
    batch = tuple(torch.from_numpy(np.asarray(tensors[k]).astype(np.int64)) for k in BATCH_KEYS)

    mlm, nsp, mlm_logits, nsp_logits = bert_losses(P, cfg, batch)
    loss = mlm + nsp
    loss.backward()
    out = {
        "mlm_loss": np.array([mlm.item()], np.float32),
        "nsp_loss": np.array([nsp.item()], np.float32),
        "loss": np.array([loss.item()], np.float32),
        "mlm_logits": mlm_logits.detach().numpy().astype(np.float32),
        "nsp_logits": nsp_logits.detach().numpy().astype(np.float32),
    }
    for name, p in P.items():
        out["grad." + name] = p.grad.detach().numpy().astype(np.float32)

    autocast = meta.get("autocast", "")
    if autocast:
        if autocast != "bf16":
            raise ValueError("autocast must be bf16 (torch's CPU autocast), got %r" % autocast)
        for p in P.values():
            p.grad = None
        with torch.autocast("cpu", dtype=torch.bfloat16):
            mlm_b, nsp_b, _, _ = bert_losses(P, cfg, batch)
        mlm_b, nsp_b = mlm_b.float(), nsp_b.float()
        (mlm_b + nsp_b).backward()
        out["bf16.mlm_loss"] = np.array([mlm_b.item()], np.float32)
        out["bf16.nsp_loss"] = np.array([nsp_b.item()], np.float32)
        for name, p in P.items():
            out["bf16.grad." + name] = p.grad.detach().float().numpy().astype(np.float32)

    steps = int(meta.get("steps", "0"))
    if steps > 0:
        hp = {k: float(meta[k]) for k in ("lr", "beta1", "beta2", "eps", "weight_decay", "grad_clip")}
        no_decay = [p for n, p in P.items() if n.endswith(".bias") or "LayerNorm" in n]
        decay = [p for n, p in P.items() if not (n.endswith(".bias") or "LayerNorm" in n)]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": hp["weight_decay"]},
                                 {"params": no_decay, "weight_decay": 0.0}],
                                lr=hp["lr"], betas=(hp["beta1"], hp["beta2"]), eps=hp["eps"], foreach=False)
        losses = []
        for _ in range(steps):
            opt.zero_grad()
            m, n, _, _ = bert_losses(P, cfg, batch)
            (m + n).backward()
            losses.append((m + n).item())
            if hp["grad_clip"] > 0:
                torch.nn.utils.clip_grad_norm_(list(P.values()), hp["grad_clip"])
            opt.step()
        out["losses"] = np.array(losses, np.float32)
        for name, p in P.items():
            out["final." + name] = p.detach().numpy().astype(np.float32)
    safetensors_np.save(args.out, out, {"torch": torch.__version__})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
