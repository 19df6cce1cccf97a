// Shared set-up for the Hugging Face conversion tests: a small GPT-2 with non-trivial weights,
// hand-built Hugging Face folders (any names, dtypes and extra tensors), raw safetensors bytes
// for corrupt files, and the one-line error check of the CLI tests.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/cpu/context.h"
#include "common/test_util.h"
#include "core/dtype.h"
#include "io/checkpoint_dir.h"
#include "io/safetensors.h"
#include "model/gpt2.h"
#include "train/checkpoint.h"

namespace mptrain::testing {

// 2 layers, 4 heads, 64 wide, V = 101 (padded to 128 by the default --vocab-multiple), 32 positions.
inline Gpt2Config small_gpt2_config(int vocab = 101) {
  Gpt2Config c;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_embd = 64;
  c.vocab_size = vocab;
  c.padded_vocab_size = pad_vocab(vocab, 128);
  c.block_size = 32;
  return c;
}

// GPT-2 initialisation plus offsets on LayerNorm weights and biases, so that no tensor is
// all zeros or all ones (a swapped or dropped tensor would go unnoticed otherwise).
inline void init_nontrivial(Gpt2& model, uint64_t seed) {
  model.init_weights(seed);
  for (const auto& spec : model.table().specs())
    if (spec.init == InitRule::Zeros || spec.init == InitRule::Ones)
      for (size_t i = 0; i < spec.numel; ++i)
        model.params()[spec.offset + i] += 0.05f * static_cast<float>((i * 7919 + spec.offset) % 17) / 17.0f;
}

// Saves the model as run_dir/step_<step> (weights only, through the checkpoint protocol).
inline std::string save_run_checkpoint(const std::string& run_dir, const Gpt2& model, int64_t step) {
  const std::string partial = begin_checkpoint(run_dir, step);
  TrainState state;
  state.step = step;
  save_weights_checkpoint(partial, model.config(), model.table(), model.params().data(), state);
  commit_checkpoint(run_dir, step);
  return run_dir + "/" + checkpoint_name(step);
}

// One tensor of a hand-built file: fp32 values stored as `dtype` (F32, F16 or BF16);
// `stored` are the values the file then holds, read back as fp32.
struct HfTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
  DType dtype = DType::F32;
  std::vector<float> stored() const {
    std::vector<float> out(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      if (dtype == DType::F16)
        out[i] = f16_to_f32(f32_to_f16(values[i]));
      else if (dtype == DType::BF16)
        out[i] = bf16_to_f32(f32_to_bf16(values[i]));
      else
        out[i] = values[i];
    }
    return out;
  }
};

// The model's parameters under their hub names (wte without padded rows).
inline std::vector<HfTensor> hub_tensors(const Gpt2& model) {
  std::vector<HfTensor> out;
  for (const auto& spec : model.table().specs()) {
    const float* p = model.params().data() + spec.offset;
    out.push_back({spec.name, spec.hf_shape, std::vector<float>(p, p + spec.hf_numel())});
  }
  return out;
}

inline void write_safetensors(const std::string& path, const std::vector<HfTensor>& tensors,
                              const std::map<std::string, std::string>& metadata = {{"format", "pt"}}) {
  SafetensorsWriter w;
  for (const auto& t : tensors) {
    if (t.dtype == DType::F32) {
      w.add_copy(t.name, DType::F32, t.shape, t.values.data());
    } else {
      std::vector<uint16_t> bits(t.values.size());
      for (size_t i = 0; i < bits.size(); ++i)
        bits[i] = t.dtype == DType::F16 ? f32_to_f16(t.values[i]).bits : f32_to_bf16(t.values[i]).bits;
      w.add_copy(t.name, t.dtype, t.shape, bits.data());
    }
  }
  for (const auto& [k, v] : metadata) w.set_metadata(k, v);
  w.write(path);
}

// The config.json of transformers' GPT2Config for `c`, as save_pretrained writes it.
inline nlohmann::json hf_config_for(const Gpt2Config& c) {
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"activation_function", "gelu_new"},
          {"attn_pdrop", 0.1},
          {"embd_pdrop", 0.1},
          {"resid_pdrop", 0.1},
          {"n_inner", nullptr},
          {"n_layer", c.n_layer},
          {"n_head", c.n_head},
          {"n_embd", c.n_embd},
          {"n_positions", c.block_size},
          {"n_ctx", c.block_size},
          {"vocab_size", c.vocab_size},
          {"layer_norm_epsilon", 1e-05},
          {"initializer_range", 0.02},
          {"scale_attn_weights", true},
          {"bos_token_id", 50256},
          {"eos_token_id", 50256},
          {"torch_dtype", "float32"},
          {"transformers_version", "4.38.2"}};
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

// A safetensors file from a header given as text and `data_bytes` bytes of data (for files the
// writer refuses to produce: overlapping offsets, broken JSON, ...).
inline void write_raw_safetensors(const std::string& path, const std::string& header, size_t data_bytes) {
  std::ofstream f(path, std::ios::binary);
  const uint64_t n = header.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << header;
  const std::vector<char> zeros(data_bytes, 0);
  f.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
}


// Every tensor of a and b: same names, dtypes, shapes and bytes.
inline void expect_same_tensors(const SafetensorsFile& a, const SafetensorsFile& b) {
  ASSERT_EQ(a.names(), b.names());
  for (const auto& name : a.names()) {
    const TensorView &x = a.get(name), &y = b.get(name);
    EXPECT_EQ(x.dtype, y.dtype) << name;
    EXPECT_EQ(x.shape, y.shape) << name;
    ASSERT_EQ(x.nbytes, y.nbytes) << name;
    EXPECT_EQ(std::memcmp(x.data, y.data, x.nbytes), 0) << name << " differs";
  }
}

}  // namespace mptrain::testing
