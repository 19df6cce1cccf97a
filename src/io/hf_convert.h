// `mptrain convert`: Hugging Face model folders ⇄ mptrain checkpoint directories.
//
//   import_hf_folder  HF folder (config.json + model.safetensors; F32, F16 or BF16 tensors)
//                     → a weights-only mptrain checkpoint at step 0 (train/checkpoint.h)
//   export_hf_folder  mptrain checkpoint or run dir → HF folder: config.json (GPT2Config),
//                     model.safetensors (fp32, hub names, no padded vocabulary rows,
//                     metadata {"format": "pt"}), and GPT-2's vocab.json + merges.txt when the
//                     vocabulary is installed and the model uses it
//
// Both write into a hidden sibling of the output folder and rename it into place at the end:
// a crash never leaves a half-written folder under the final name. The output folder must not
// exist or be empty. Models are dispatched on config.json's model_type (today: gpt2; BERT adds
// its HfNameMap and config translation beside io/hf_gpt2.h).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "model/gpt2_config.h"

namespace mptrain {

struct HfImportResult {
  std::string model_type;  // "gpt2"
  Gpt2Config config;
  size_t num_params = 0;                 // stored elements (real vocabulary rows only)
  std::map<std::string, size_t> dtypes;  // source dtype name → number of parameter tensors
  std::vector<std::string> ignored;      // buffers skipped (e.g. h.0.attn.bias)
  std::vector<std::string> tied_copies;  // e.g. lm_head.weight, checked equal to wte.weight
};

// vocab_multiple pads the vocabulary in memory as `train --vocab-multiple` does (1 = off).
HfImportResult import_hf_folder(const std::string& hf_dir, const std::string& out_dir, int vocab_multiple);

struct HfExportResult {
  std::string checkpoint;  // the resolved checkpoint directory
  Gpt2Config config;
  size_t num_params = 0;
  bool tokenizer_files = false;  // vocab.json and merges.txt were written
};

// vocab_dir: GPT-2's encoder.json + vocab.bpe (see find_vocab_dir); an explicit folder that
// lacks them is an error, a missing default vocabulary only leaves the tokenizer files out.
HfExportResult export_hf_folder(const std::string& ckpt_or_run_dir, const std::string& out_dir,
                                const std::string& vocab_dir);

}  // namespace mptrain
