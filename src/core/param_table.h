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

struct ParamSpec {
  std::string name;               // Hugging Face name, e.g. "h.0.attn.c_attn.weight"
  std::vector<int64_t> shape;     // shape as stored in memory (wte has Vp rows)
  std::vector<int64_t> hf_shape;  // shape in checkpoints (wte has V rows); a prefix of the memory
  InitRule init = InitRule::Normal;
  bool decay = false;  // AdamW weight decay applies (2-D weights only)
  size_t offset = 0;   // in elements, into the flat buffer
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
  const std::vector<ParamSpec>& specs() const { return specs_; }
  const ParamSpec& get(const std::string& name) const;  // throws Error for an unknown name
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
