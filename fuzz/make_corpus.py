#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into fuzz/corpus/<target>/: a few small valid
files of each format plus a few broken ones (truncated, wrong sizes, wrong types), so that
libFuzzer starts from inputs that reach deep into each parser. The seeds are committed; run
this again only to regenerate them (the regression inputs under */crash-* are kept as they are)."""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def put(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# --- safetensors ------------------------------------------------------------------------------
def safetensors(header, payload=b"", pad=True, length=None):
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    n = len(text) if length is None else length
    return struct.pack("<Q", n) + text + payload


f32 = struct.pack("<6f", *range(6))
put("safetensors", "valid_f32", safetensors(
    {"__metadata__": {"format": "pt"}, "w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}}, f32))
put("safetensors", "valid_mixed", safetensors({
    "a": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]},
    "b": {"dtype": "BF16", "shape": [2], "data_offsets": [8, 12]},
    "c": {"dtype": "U8", "shape": [], "data_offsets": [12, 13]},
    "z": {"dtype": "I64", "shape": [0, 5], "data_offsets": [13, 13]}}, bytes(13)))
put("safetensors", "bad_overlap", safetensors({
    "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
    "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, bytes(12)))
put("safetensors", "bad_offsets_past_end", safetensors(
    {"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, bytes(8)))
put("safetensors", "bad_huge_shape", safetensors(
    {"w": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 16]}}, bytes(16)))
put("safetensors", "bad_header_length", safetensors({"w": {"dtype": "F32", "shape": [1],
                                                           "data_offsets": [0, 4]}}, bytes(4), length=1 << 62))
put("safetensors", "bad_metadata", safetensors({"__metadata__": {"format": 1}}))

# --- token shards -----------------------------------------------------------------------------
def shard(tokens, magic=20240520, version=1, count=None, width="H"):
    header = [magic, version, len(tokens) if count is None else count] + [0] * 253
    return struct.pack("<256i", *header) + struct.pack("<%d%s" % (len(tokens), width), *tokens)


put("shard", "valid", shard([50256, 15496, 995, 0, 65535]))
put("shard", "valid_empty", shard([]))
put("shard", "bad_count", shard([1, 2, 3], count=2147483647))
put("shard", "bad_negative_count", shard([1], count=-1))
put("shard", "bad_magic", shard([1], magic=1))
put("shard", "bad_truncated", shard([1, 2])[:600])
put("shard", "valid_wide", shard([128000, 9906, 1917, 0, 151645], magic=20240801, version=7, width="I"))
put("shard", "bad_wide_version", shard([1, 2], magic=20240801, version=1, width="I"))
put("shard", "bad_wide_odd_size", shard([1, 2, 3], magic=20240801, version=7))

# --- checkpoint state.json --------------------------------------------------------------------
state = {"step": 100, "train_shard": 0, "train_offset": 12800, "train_epoch": 1, "seed": 1337,
         "sample_counter": 7, "precision": "bf16", "options": {"lr": 0.0006, "batch": 4}}
put("checkpoint_state", "valid", json.dumps(state, indent=2))
fp16 = dict(state, precision="fp16", loss_scaler={"scale": 65536.0, "growth_tracker": 3, "skipped_steps": 2})
put("checkpoint_state", "valid_fp16", json.dumps(fp16))
put("checkpoint_state", "valid_old", json.dumps({k: state[k] for k in list(state)[:6]}))
put("checkpoint_state", "bad_types", json.dumps(dict(state, step="100", seed=-1.5)))
put("checkpoint_state", "bad_scaler", json.dumps(dict(fp16, loss_scaler={"scale": -1, "growth_tracker": 0})))
put("checkpoint_state", "bad_precision", json.dumps(dict(state, precision="fp8")))
put("checkpoint_state", "bad_truncated", json.dumps(state)[:40])

# --- model configs: mptrain_config metadata and Hugging Face config.json -----------------------
put("model_config", "valid_mptrain", json.dumps({"block_size": 64, "vocab_size": 50257, "padded_vocab_size": 50304,
                                                 "n_layer": 2, "n_head": 2, "n_embd": 64, "ln_eps": 1e-5,
                                                 "init_std": 0.02}))
put("model_config", "valid_hf", json.dumps({
    "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "activation_function": "gelu_new",
    "n_layer": 2, "n_head": 2, "n_embd": 64, "n_positions": 64, "n_ctx": 64, "vocab_size": 50257,
    "layer_norm_epsilon": 1e-05, "initializer_range": 0.02, "tie_word_embeddings": True, "n_inner": None}))
put("model_config", "bad_sizes", json.dumps({"block_size": 64, "vocab_size": 50257, "padded_vocab_size": 100,
                                             "n_layer": 2, "n_head": 3, "n_embd": 64}))
put("model_config", "bad_hf", json.dumps({"model_type": "bert", "n_layer": -1, "n_head": "2"}))

# --- GPT-2 vocabulary: encoder.json NUL vocab.bpe ----------------------------------------------
def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


b2u = bytes_to_unicode()
def tok(s):
    return "".join(b2u[b] for b in s.encode())


encoder = {b2u[b]: i for i, b in enumerate(range(256))}
merges = [("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o"), (" ", "w"), ("o", "r"), (" w", "or"),
          ("l", "d"), (" wor", "ld"), ("1", "2"), (" ", " ")]
for a, b in merges:
    encoder.setdefault(tok(a + b), len(encoder))
encoder["<|endoftext|>"] = len(encoder)
bpe = "#version: 0.2\n" + "".join(tok(a) + " " + tok(b) + "\n" for a, b in merges)
put("gpt2_vocab", "valid", json.dumps(encoder, ensure_ascii=False) + "\0" + bpe)
put("gpt2_vocab", "valid_no_merges_header", json.dumps(encoder, ensure_ascii=False) + "\0" + bpe.split("\n", 1)[1])
put("gpt2_vocab", "bad_unknown_merge", json.dumps(encoder, ensure_ascii=False) + "\0" + bpe + "x y\n")
bad = dict(encoder)
bad[tok("hello")] = 70000
put("gpt2_vocab", "bad_id", json.dumps(bad, ensure_ascii=False) + "\0" + bpe)
put("gpt2_vocab", "bad_not_object", "[1, 2, 3]\0#version: 0.2\n")

# --- HellaSwag jsonl ---------------------------------------------------------------------------
ex = {"ind": 4, "activity_label": "Removing ice from car", "ctx_a": "Then, the man writes over the snow.",
      "ctx_b": "then", "ctx": "Then, the man writes over the snow. then",
      "endings": [", the man adds wax.", ", a woman is seen.", "the man continues.", "the man stops."],
      "label": 3, "split": "val"}
put("hellaswag", "valid", json.dumps(ex) + "\n" + json.dumps(dict(ex, label="1")) + "\n\n")
put("hellaswag", "valid_ctx_ab", json.dumps({k: v for k, v in ex.items() if k != "ctx"}) + "\r\n")
put("hellaswag", "bad_label", json.dumps(dict(ex, label=7)) + "\n")
put("hellaswag", "bad_endings", json.dumps(dict(ex, endings=["a", 2, "c", "d"])) + "\n")
put("hellaswag", "bad_json", json.dumps(ex)[:50] + "\n")

# --- BERT vocab.txt ----------------------------------------------------------------------------
bert_vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]", "the", "cat", "sat", "##s", "on",
              "mat", ",", ".", "!", "na", "##ive", "東", "京", "a", "##b"]
put("wordpiece_vocab", "valid", "\n".join(bert_vocab) + "\n")
put("wordpiece_vocab", "valid_crlf", "\r\n".join(bert_vocab))
put("wordpiece_vocab", "bad_duplicate", "\n".join(bert_vocab + ["cat"]) + "\n")
put("wordpiece_vocab", "bad_no_specials", "the\ncat\n")
put("wordpiece_vocab", "bad_empty_line", "\n".join(bert_vocab[:5] + ["", "x"]) + "\n")


# --- BERT instance files ------------------------------------------------------------------------
def fnv1a(tokens):
    h = 0xcbf29ce484222325
    for t in tokens:
        for c in (t + "\n").encode():
            h = ((h ^ c) * 0x100000001b3) & (2**64 - 1)
    return h


def bert_instances(instances, vocab=bert_vocab, max_seq_len=16, tweak=None):
    text = "".join(t + "\n" for t in vocab).encode()
    ntok = sum(len(t) for t, _ in instances)
    fields = dict(magic=b"MPTBERTI", version=1, header_bytes=256, max_seq_len=max_seq_len, vocab_size=len(vocab),
                  num_instances=len(instances), num_tokens=ntok, vocab_bytes=len(text), fingerprint=fnv1a(vocab),
                  pad=0, unk=1, cls=2, sep=3, mask=4, flags=1, dupe=1, docs=1, seed=42)
    fields.update(tweak or {})
    header = struct.pack("<8sIIIIQQQQiiiiiIIIQ", *fields.values())
    out = header + bytes(256 - len(header))
    out += text + bytes(-len(text) % 8)
    offsets = [0]
    for t, _ in instances:
        offsets.append(offsets[-1] + len(t))
    out += struct.pack("<%dQ" % len(offsets), *offsets)
    nsp = bytes(label for _, label in instances)
    out += nsp + bytes(-len(nsp) % 8)
    for t, _ in instances:
        out += struct.pack("<%dH" % len(t), *t)
    return out


good = [([2, 6, 7, 3, 8, 3], 0), ([2, 19, 20, 3, 11, 12, 13, 3], 1)]
put("bert_instances", "valid", bert_instances(good))
put("bert_instances", "valid_empty", bert_instances([]))
put("bert_instances", "bad_id", bert_instances([([2, 6, 99, 3, 8, 3], 0)]))
put("bert_instances", "bad_nsp", bert_instances([(good[0][0], 2)]))
put("bert_instances", "bad_counts", bert_instances(good, tweak={"num_tokens": 1 << 60}))
put("bert_instances", "bad_fingerprint", bert_instances(good, tweak={"fingerprint": 1}))
put("bert_instances", "bad_shape", bert_instances([([2, 3, 6, 3, 3], 0)]))
put("bert_instances", "bad_truncated", bert_instances(good)[:300])
# max_seq_len sizes the loader's batch buffers (B x max_seq_len): 2^31 - 1 must be refused.
put("bert_instances", "regress_max_seq_len_huge", bert_instances(good, max_seq_len=(1 << 31) - 1))

# --- BERT checkpoint JSON: state.json, mptrain_config, tokenizer_config.json ------------------------
bert_state = {"step": 300, "seed": 1337, "sample_counter": 0, "lr_scale": 1.0, "nan_rollbacks": 0,
              "precision": "fp32", "options": {"lr": 0.003, "batch": 16}, "model": "bert",
              "train_index": 4800, "train_epoch": 2}
put("bert_checkpoint", "valid_state", json.dumps(bert_state, indent=2))
# What BERT checkpoints held before the run state was shared with GPT-2's.
put("bert_checkpoint", "valid_state_old", json.dumps({"model": "bert", "step": 5, "train_index": 80,
                                                      "train_epoch": 0, "seed": 0, "options": {}}))
bert_config = {"vocab_size": 30522, "padded_vocab_size": 30528, "max_position": 512, "type_vocab_size": 2,
               "n_layer": 2, "n_head": 2, "hidden": 128, "intermediate": 512, "pad_token_id": 0,
               "ln_eps": 1e-12, "init_std": 0.02}
put("bert_checkpoint", "valid_config", json.dumps(bert_config))
put("bert_checkpoint", "bad_model_not_string", json.dumps(dict(bert_state, model=5)))
put("bert_checkpoint", "bad_model_gpt2", json.dumps(dict(bert_state, model="gpt2")))
put("bert_checkpoint", "bad_step_1e300", json.dumps(dict(bert_state, step=1e300)))
put("bert_checkpoint", "bad_seed_negative", json.dumps(dict(bert_state, seed=-1)))
put("bert_checkpoint", "bad_index_negative", json.dumps(dict(bert_state, train_index=-5)))
put("bert_checkpoint", "bad_scaler", json.dumps(dict(bert_state, loss_scaler={"scale": 0, "growth_tracker": 0,
                                                                              "skipped_steps": 0})))
put("bert_checkpoint", "bad_config_1e300", json.dumps(dict(bert_config, n_layer=1e300, ln_eps=1e300)))
put("bert_checkpoint", "bad_config_heads", json.dumps(dict(bert_config, n_head=3)))
put("bert_checkpoint", "bad_truncated", json.dumps(bert_state)[:50])

# --- Hugging Face config.json (convert --from-hf), GPT-2 and BERT ----------------------------------
hf_bert = {"architectures": ["BertForPreTraining"], "model_type": "bert", "hidden_act": "gelu",
           "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 512,
           "max_position_embeddings": 512, "type_vocab_size": 2, "vocab_size": 30522, "pad_token_id": 0,
           "layer_norm_eps": 1e-12, "initializer_range": 0.02, "hidden_dropout_prob": 0.1,
           "position_embedding_type": "absolute", "tie_word_embeddings": True, "torch_dtype": "float32"}
put("hf_config", "valid_bert", json.dumps(hf_bert, indent=2))
put("hf_config", "valid_bert_minimal", json.dumps({k: hf_bert[k] for k in
                                                   ("vocab_size", "hidden_size", "num_hidden_layers",
                                                    "num_attention_heads", "intermediate_size")}))
put("hf_config", "valid_gpt2", json.dumps({
    "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "activation_function": "gelu_new",
    "n_layer": 2, "n_head": 2, "n_embd": 64, "n_positions": 64, "vocab_size": 50257,
    "layer_norm_epsilon": 1e-05, "initializer_range": 0.02, "tie_word_embeddings": True, "n_inner": None}))
put("hf_config", "bad_bert_eps_1e300", json.dumps(dict(hf_bert, layer_norm_eps=1e300)))
put("hf_config", "bad_bert_pad_token", json.dumps(dict(hf_bert, pad_token_id=1e20)))
put("hf_config", "bad_bert_act", json.dumps(dict(hf_bert, hidden_act="relu")))
put("hf_config", "bad_bert_sizes", json.dumps(dict(hf_bert, hidden_size=2**40, num_attention_heads=-2)))
put("hf_config", "bad_architecture", json.dumps(dict(hf_bert, architectures=["BertModel"])))
put("hf_config", "bad_not_object", json.dumps([hf_bert]))
put("hf_config", "bad_truncated", json.dumps(hf_bert)[:60])


# --- corpus records (JSON lines and text, plain or compressed) ---------------------------------
# The first byte is the mode (fuzz/corpus_records_input.h): bits 0-1 plain/.zst/.gz/.xz, bit 2 JSON
# lines (else text with % lines), bit 3 skip bad records, bits 4-5 the block size (1/64/4096/1 MiB).
def records_mode(compression=0, json_lines=True, skip=False, block=1):
    return bytes([compression | (4 if json_lines else 0) | (8 if skip else 0) | (block << 4)])


def zstd_bytes(data):
    import subprocess
    return subprocess.run(["zstd", "-q", "-c"], input=data, capture_output=True, check=True).stdout


import gzip  # noqa: E402
import lzma  # noqa: E402

jsonl = (b'{"id": 1, "text": "First record.\\nIt\'s two lines."}\n'
         b'\n'
         b'{"id": 2, "text": "caf\\u00e9 \\ud83d\\ude00", "meta": {"body": "nested"}}\n'
         b'{"id": 3, "text": ""}\n'
         b'{"text": "raw \xe2\x80\x94 utf-8"}')
text = b"one document\n%\ntwo\nlines\n%\n%\nthree, no newline"
put("corpus_records", "valid_jsonl", records_mode(block=1) + jsonl)
put("corpus_records", "valid_jsonl_big_block", records_mode(block=3) + jsonl)
put("corpus_records", "valid_text", records_mode(json_lines=False, block=1) + text)
put("corpus_records", "valid_jsonl_zst", records_mode(1, block=2) + zstd_bytes(jsonl))
put("corpus_records", "valid_jsonl_gz", records_mode(2, block=1) + gzip.compress(jsonl, mtime=0))
put("corpus_records", "valid_text_xz", records_mode(3, json_lines=False, block=2) + lzma.compress(text))
put("corpus_records", "valid_skipped_bad_record", records_mode(skip=True) + b'{"text": 5}\nnot json\n' + jsonl)
put("corpus_records", "bad_not_json", records_mode() + b'{"text": "a"}\n{"text": "cut off\n')
put("corpus_records", "bad_no_text_field", records_mode() + b'{"body": "a"}\n')
put("corpus_records", "bad_invalid_utf8", records_mode() + b'{"text": "\xff"}\n')
put("corpus_records", "bad_zst_truncated", records_mode(1) + zstd_bytes(jsonl * 20)[:40])
put("corpus_records", "bad_gz_corrupt",
    records_mode(2) + (lambda g: g[:20] + bytes(b ^ 0x55 for b in g[20:40]) + g[40:])(gzip.compress(jsonl, mtime=0)))
put("corpus_records", "bad_xz_truncated", records_mode(3) + lzma.compress(jsonl)[:30])
