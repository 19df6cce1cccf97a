// The parameter table: one entry per parameter tensor (Hugging Face name, shape,
// initialisation rule, weight-decay flag, offset into the flat buffer). Parameters,
// gradients and optimizer moments are each ONE allocation carved by this table;
// init, checkpoint I/O, optimizer groups and test comparisons all read it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/buffer.h"

namespace mptrain {

enum class InitRule {
  Normal,          // N(0, std)
  NormalResidual,  // N(0, std / sqrt(2·n_layer)): projections that write into the residual stream
  Zeros,
  Ones,
  NormalRowsThenZeros,  // N(0, std) for the first `hf_shape[0]` rows, zero for padded rows
};

// What a tensor is to an optimizer that treats matrices apart (Muon): the weight of a hidden
// linear layer (attention and MLP matrices — not embeddings, output heads, biases or norm gains),
// and which way it is stored: nn.Linear's [out, in] (BERT) or Conv1D's [in, out] (GPT-2). The
// orientation sets Muon's fan-out/fan-in scale; None for every other tensor.
enum class MatrixLayout { None, OutIn, InOut };
// Attention's query/key/value weights: Fused, one tensor holding the three side by side along its
// output dimension (GPT-2's c_attn [C, 3C]); Part, one of three consecutive tensors q, k, v
// (BERT's). Muon orthogonalises them as one matrix or as three (optim/muon.h).
enum class QkvRole { None, Fused, Part };

struct ParamSpec {
  std::string name;               // Hugging Face name, e.g. "h.0.attn.c_attn.weight"
  std::vector<int64_t> shape;     // shape as stored in memory (wte has Vp rows)
  std::vector<int64_t> hf_shape;  // shape in checkpoints (wte has V rows); a prefix of the memory
  InitRule init = InitRule::Normal;
  bool decay = false;  // AdamW weight decay applies (2-D weights only)
  MatrixLayout matrix = MatrixLayout::None;
  QkvRole qkv = QkvRole::None;
  size_t offset = 0;  // in elements, into the flat buffer
  size_t numel = 0;
  size_t hf_numel() const;
};

// [begin, end) of the flat buffer, in elements.
struct ParamRange {
  size_t begin = 0, end = 0;
  size_t size() const { return end - begin; }
};

class ParamTable {
 public:
  // Appends a tensor; offsets are assigned in order of addition.
  void add(std::string name, std::vector<int64_t> shape, InitRule init, bool decay,
           std::vector<int64_t> hf_shape = {});
  // Appends a hidden layer's weight matrix (decayed; see MatrixLayout).
  void add_matrix(std::string name, std::vector<int64_t> shape, InitRule init, MatrixLayout layout,
                  QkvRole qkv = QkvRole::None);
  // Marks the last tensor added as (a piece of) a matrix without checking its shape: a ZeRO-1
  // shard's piece of a cut matrix, which Muon then refuses by name.
  void mark_matrix(MatrixLayout layout, QkvRole qkv);
  const std::vector<ParamSpec>& specs() const { return specs_; }
  const ParamSpec& get(const std::string& name) const;  // throws Error for an unknown name
  bool has(const std::string& name) const;
  // The range the tensors whose names start with `prefix` occupy (e.g. "h.3." for a GPT-2
  // block); throws Error when none does or they are not consecutive.
  ParamRange range(const std::string& prefix) const;
  size_t total() const { return total_; }

 private:
  std::vector<ParamSpec> specs_;
  size_t total_ = 0;
};

// Fills params (laid out by table) from a seed with each spec's InitRule: Normal draws
// N(0, std), NormalResidual N(0, residual_std), NormalRowsThenZeros N(0, std) over the HF rows
// then zeros (padded vocabulary). Counter-based (seed, spec index, element): thread-independent.
void init_params(const ParamTable& table, float* params, uint64_t seed, float std, float residual_std);
// The same into a buffer in any memory: in place on the host, else drawn on the host and
// uploaded.
void init_params(const ParamTable& table, FloatBuffer& params, uint64_t seed, float std, float residual_std);

}  // namespace mptrain
