"""Logits of a Hugging Face GPT-2 folder, read the way Hugging Face reads it.

    /usr/bin/python3 hf_gpt2_logits.py HF_DIR IN.safetensors OUT.safetensors

HF_DIR holds config.json and model.safetensors as `mptrain convert --to-hf` writes them.
The script checks what transformers' GPT2LMHeadModel.from_pretrained relies on (transformers
itself is not installed here): config.json names model_type "gpt2" and the GPT2LMHeadModel
architecture, the fields GPT2Config reads (n_layer, n_head, n_embd, n_positions, n_ctx,
vocab_size, activation_function, layer_norm_epsilon, bos/eos ids, tied embeddings), and
model.safetensors has metadata {"format": "pt"} and exactly the hub's tensor names and
Conv1D [in, out] shapes for that config (no lm_head.weight: it is tied to wte). Then it builds
the independent PyTorch GPT-2 of gpt2_model.py from the config, loads the tensors by their
HF names (load_state, strict) and runs the batch "inputs" (I32 [B, T]) of IN.safetensors.
OUT.safetensors gets "logits" (F32 [B, T, V]). Any mismatch exits non-zero with a message.
"""

import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_model  # noqa: E402
import safetensors_np  # noqa: E402


def fail(msg):
    sys.stderr.write("hf_gpt2_logits: %s\n" % msg)
    sys.exit(1)


def check_config(cfg):
    if cfg.get("model_type") != "gpt2":
        fail("config.json model_type is %r, not 'gpt2'" % cfg.get("model_type"))
    if cfg.get("architectures") != ["GPT2LMHeadModel"]:
        fail("config.json architectures is %r" % cfg.get("architectures"))
    for key in ("n_layer", "n_head", "n_embd", "n_positions", "n_ctx", "vocab_size"):
        if not isinstance(cfg.get(key), int) or cfg[key] <= 0:
            fail("config.json %s is %r, not a positive integer" % (key, cfg.get(key)))
    if cfg["n_ctx"] != cfg["n_positions"]:
        fail("config.json n_ctx %d differs from n_positions %d" % (cfg["n_ctx"], cfg["n_positions"]))
    if cfg.get("activation_function") != "gelu_new":
        fail("config.json activation_function is %r" % cfg.get("activation_function"))
    if abs(cfg.get("layer_norm_epsilon", 0) - 1e-5) > 1e-12:
        fail("config.json layer_norm_epsilon is %r" % cfg.get("layer_norm_epsilon"))
    if cfg.get("bos_token_id") != 50256 or cfg.get("eos_token_id") != 50256:
        fail("config.json bos/eos ids are %r/%r" % (cfg.get("bos_token_id"), cfg.get("eos_token_id")))
    if cfg.get("tie_word_embeddings", True) is not True:
        fail("config.json unties the embeddings")


def main(argv):
    if len(argv) != 4:
        sys.stderr.write(__doc__)
        return 2
    hf_dir, in_path, out_path = argv[1:]
    with open(os.path.join(hf_dir, "config.json")) as f:
        cfg = json.load(f)
    check_config(cfg)

    config = gpt2_model.GPT2Config(n_layer=cfg["n_layer"], n_head=cfg["n_head"], n_embd=cfg["n_embd"],
                                   vocab_size=cfg["vocab_size"], block_size=cfg["n_positions"])
    try:
        tensors = safetensors_np.load_hf_model(os.path.join(hf_dir, "model.safetensors"),
                                               gpt2_model.param_shapes(config), "the hub's GPT-2")
    except safetensors_np.SafetensorsError as e:
        fail(str(e))

    model = gpt2_model.GPT2(config)
    gpt2_model.load_state(model, tensors, strict=True)
    model.eval()
    inputs, _ = safetensors_np.load(in_path)
    idx = torch.from_numpy(inputs["inputs"].astype(np.int64))
    with torch.no_grad():
        logits, _ = model(idx)
    safetensors_np.save(out_path, {"logits": logits.numpy().astype(np.float32)})
    return 0


if __name__ == "__main__":
    torch.set_num_threads(2)
    sys.exit(main(sys.argv))
