// `mptrain convert`: Hugging Face model folders ⇄ mptrain checkpoint directories, for GPT-2
// (GPT2LMHeadModel), Llama (LlamaForCausalLM) and BERT (BertForPreTraining).
//
//   import_hf_folder  HF folder (config.json + model.safetensors; F32, F16 or BF16 tensors)
//                     → a weights-only mptrain checkpoint at step 0 (GPT-2: train/checkpoint.h;
//                     BERT: train/bert_checkpoint.h, with the folder's vocab.txt and do_lower_case)
//   export_hf_folder  mptrain checkpoint or run dir → HF folder: config.json (GPT2Config,
//                     LlamaConfig or BertConfig), model.safetensors (fp32, HF names, no padded vocabulary rows,
//                     metadata {"format": "pt"}), and the tokenizer files when there are some:
//                     GPT-2's vocab.json + merges.txt when the vocabulary is installed and the
//                     model uses it (GPT-2, and a Llama trained on GPT-2's tokens); BERT's vocab.txt + tokenizer_config.json from the checkpoint
//
// Both write into a hidden sibling of the output folder and rename it into place at the end:
// a crash never leaves a half-written folder under the final name. The output folder must not
// exist or be empty. The family comes from config.json's model_type (or its architectures)
// on import and from the checkpoint's metadata on export; each has its HfNameMap and config
// translation (hf/hf_gpt2.h, hf/hf_bert.h) over the shared reader (io/hf_folder.h).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "model/bert_config.h"
#include "model/gpt2_config.h"
#include "model/llama_config.h"

namespace mptrain {

struct HfImportResult {
  std::string model_type;  // "gpt2", "llama" or "bert": which of the configs below is set
  Gpt2Config config;
  LlamaConfig llama;
  BertConfig bert;
  size_t num_params = 0;                 // stored elements (real vocabulary rows only)
  std::map<std::string, size_t> dtypes;  // source dtype name → number of parameter tensors
  std::vector<std::string> ignored;      // buffers skipped (e.g. h.0.attn.bias)
  std::vector<std::string> tied_copies;  // e.g. lm_head.weight, checked equal to wte.weight
  std::vector<std::string> stand_ins;    // BERT: decoder names read as their absent sources
  // BERT: where vocab.txt came from (empty: none, the checkpoint has no vocabulary), its size
  // and casing.
  std::string vocab_source;
  int vocab_tokens = 0;
  bool lower_case = true;
};

// vocab_multiple pads the vocabulary in memory as `train` does (1 = off; 0 = the family's
// default: 128 for GPT-2, 64 for BERT). bert_vocab: a vocab.txt to use instead of the
// folder's (BERT only).
HfImportResult import_hf_folder(const std::string& hf_dir, const std::string& out_dir, int vocab_multiple,
                                const std::string& bert_vocab = "");

struct HfExportResult {
  std::string checkpoint;  // the resolved checkpoint directory
  std::string model_type;  // "gpt2", "llama" or "bert"
  Gpt2Config config;
  LlamaConfig llama;
  BertConfig bert;
  size_t num_params = 0;
  bool tokenizer_files = false;  // GPT-2: vocab.json and merges.txt; BERT: vocab.txt and tokenizer_config.json
};

// vocab_dir: GPT-2's encoder.json + vocab.bpe (see find_vocab_dir); an explicit folder that
// lacks them is an error, a missing default vocabulary only leaves the tokenizer files out.
// bert_vocab: a vocab.txt to write instead of the checkpoint's (BERT only; a checkpoint
// without one and no bert_vocab leaves the tokenizer files out).
HfExportResult export_hf_folder(const std::string& ckpt_or_run_dir, const std::string& out_dir,
                                const std::string& vocab_dir, const std::string& bert_vocab = "");

}  // namespace mptrain
