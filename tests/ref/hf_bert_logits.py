"""MLM and NSP logits of a Hugging Face BertForPreTraining (or BertForMaskedLM) folder, or a
BertForSequenceClassification's classifier logits (in nsp_logits, [B, num_labels]; no MLM), read
the way Hugging Face reads it.

    /usr/bin/python3 hf_bert_logits.py HF_DIR IN.safetensors OUT.safetensors

HF_DIR holds config.json, model.safetensors (and vocab.txt + tokenizer_config.json) as
`mptrain convert --to-hf` writes them for a BERT checkpoint. transformers is not installed
here, so the script checks what BertForPreTraining.from_pretrained and BertTokenizer rely on:
config.json names model_type "bert" and the BertForPreTraining architecture and has the
BertConfig fields (vocab_size, hidden_size, num_hidden_layers, num_attention_heads,
intermediate_size, hidden_act "gelu", max_position_embeddings, type_vocab_size,
layer_norm_eps, initializer_range, pad_token_id); model.safetensors has metadata
{"format": "pt"}, F32 tensors, exactly BertForPreTraining's names with nn.Linear [out, in]
shapes for that config (the decoder is tied: no cls.predictions.decoder.*); vocab.txt, when
present, has one token per line and at most vocab_size of them; tokenizer_config.json names
BertTokenizer and a boolean do_lower_case. Then it runs the independent PyTorch BERT of
bert_reference.py (bert_losses: BertForPreTraining's forward written from modeling_bert.py)
on the parameters looked up by their HF names.

IN: input_ids, token_type_ids, attention_mask, mlm_labels [B,T] and nsp_labels [B], I32 (the
conventions of bert_reference.py). OUT (F32): mlm_logits [M, V] at the masked positions in
row-major (b, t) order, nsp_logits [B, 2], mlm_loss [1], nsp_loss [1].
A folder whose config.json names BertForMaskedLM (an MLM-only model) must hold exactly that
class's tensors (no pooler, no cls.seq_relationship): nsp_logits is then [0, 2] and nsp_loss 0.
Any mismatch exits non-zero with a message.
"""

import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bert_reference  # noqa: E402
import safetensors_np  # noqa: E402

CONFIG_INTS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
               "max_position_embeddings", "type_vocab_size")


def fail(msg):
    sys.stderr.write("hf_bert_logits: %s\n" % msg)
    sys.exit(1)


def check_config(cfg):
    if cfg.get("model_type") != "bert":
        fail("config.json model_type is %r, not 'bert'" % cfg.get("model_type"))
    if cfg.get("architectures") not in (["BertForPreTraining"], ["BertForMaskedLM"],
                                        ["BertForSequenceClassification"]):
        fail("config.json architectures is %r" % cfg.get("architectures"))
    if cfg["architectures"] == ["BertForSequenceClassification"]:
        # PretrainedConfig: id2label's keys are "0".."K-1", label2id its inverse.
        id2label, label2id = cfg.get("id2label"), cfg.get("label2id")
        if not isinstance(id2label, dict) or sorted(id2label) != sorted(str(i) for i in range(len(id2label))):
            fail("config.json id2label is %r" % id2label)
        if label2id != {v: int(k) for k, v in id2label.items()}:
            fail("config.json label2id %r is not id2label's inverse" % label2id)
    for key in CONFIG_INTS:
        if not isinstance(cfg.get(key), int) or isinstance(cfg.get(key), bool) or cfg[key] <= 0:
            fail("config.json %s is %r, not a positive integer" % (key, cfg.get(key)))
    if cfg.get("hidden_act") != "gelu":
        fail("config.json hidden_act is %r, not 'gelu' (erf)" % cfg.get("hidden_act"))
    for key in ("layer_norm_eps", "initializer_range"):
        if not isinstance(cfg.get(key), float) or not cfg[key] > 0:
            fail("config.json %s is %r" % (key, cfg.get(key)))
    pad = cfg.get("pad_token_id")
    if not isinstance(pad, int) or not 0 <= pad < cfg["vocab_size"]:
        fail("config.json pad_token_id is %r" % pad)
    if cfg.get("position_embedding_type", "absolute") != "absolute" or cfg.get("is_decoder", False):
        fail("config.json is not an absolute-position encoder")
    if cfg.get("tie_word_embeddings", True) is not True:
        fail("config.json unties the word embeddings")


def check_tokenizer(hf_dir, cfg):
    vocab = os.path.join(hf_dir, "vocab.txt")
    if not os.path.exists(vocab):
        return
    with open(vocab, encoding="utf-8") as f:
        tokens = f.read().split("\n")
    if tokens and tokens[-1] == "":
        tokens.pop()
    if not tokens or len(tokens) > cfg["vocab_size"] or len(set(tokens)) != len(tokens):
        fail("vocab.txt has %d tokens (%d distinct) for vocab_size %d"
             % (len(tokens), len(set(tokens)), cfg["vocab_size"]))
    for special in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"):
        if special not in tokens:
            fail("vocab.txt lacks %s" % special)
    with open(os.path.join(hf_dir, "tokenizer_config.json")) as f:
        tc = json.load(f)
    if tc.get("tokenizer_class") != "BertTokenizer" or not isinstance(tc.get("do_lower_case"), bool):
        fail("tokenizer_config.json is %r" % tc)


def main(argv):
    if len(argv) != 4:
        sys.stderr.write(__doc__)
        return 2
    hf_dir, in_path, out_path = argv[1:]
    with open(os.path.join(hf_dir, "config.json")) as f:
        cfg = json.load(f)
    check_config(cfg)
    check_tokenizer(hf_dir, cfg)
    ref_cfg = {"n_layer": cfg["num_hidden_layers"], "n_head": cfg["num_attention_heads"],
               "hidden": cfg["hidden_size"], "intermediate": cfg["intermediate_size"],
               "vocab_size": cfg["vocab_size"], "max_position": cfg["max_position_embeddings"],
               "type_vocab_size": cfg["type_vocab_size"], "pad_token_id": cfg["pad_token_id"],
               "ln_eps": cfg["layer_norm_eps"]}
    if ref_cfg["hidden"] % ref_cfg["n_head"]:
        fail("hidden_size is not a multiple of num_attention_heads")

    family = cfg["architectures"][0]
    num_labels = len(cfg["id2label"]) if family == "BertForSequenceClassification" else 0
    expected = bert_reference.expected_shapes(ref_cfg, nsp=family == "BertForPreTraining", num_labels=num_labels)
    try:
        tensors = safetensors_np.load_hf_model(os.path.join(hf_dir, "model.safetensors"), expected, family)
    except safetensors_np.SafetensorsError as e:
        fail(str(e))

    P = {name: torch.from_numpy(np.ascontiguousarray(tensors[name])) for name in expected}
    inputs, _ = safetensors_np.load(in_path)
    batch = tuple(torch.from_numpy(np.asarray(inputs[k]).astype(np.int64)) for k in bert_reference.BATCH_KEYS)
    with torch.no_grad():
        mlm, nsp, mlm_logits, nsp_logits = bert_reference.bert_losses(P, ref_cfg, batch)
    safetensors_np.save(out_path, {
        "mlm_logits": mlm_logits.numpy().astype(np.float32),
        "nsp_logits": nsp_logits.numpy().astype(np.float32),
        "mlm_loss": np.array([mlm.item()], np.float32),
        "nsp_loss": np.array([nsp.item()], np.float32),
    })
    return 0


if __name__ == "__main__":
    torch.set_num_threads(2)
    sys.exit(main(sys.argv))
