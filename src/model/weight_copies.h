// The low-precision copies of a model's GEMM weights (autocast's weight-cast cache), shared by
// every model: which parameters a GEMM reads, the copy each gets in its GEMM's operand format
// (bf16, fp16, TF32-rounded fp32), one buffer carved in parameter-table order, and the lazy
// refresh from the fp32 master weights. A GPU's plan (policy.small_weights 16-bit) copies the
// other weights too (LayerNorm gains, biases, position tables), each rounded once.
//
// Contract (the models' params() implements it): every writer of the parameters marks the
// copies stale; the next forward calls refresh_if_stale before its first GEMM, so the copies
// are rebuilt once per optimizer step.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/buffer.h"
#include "core/dtype.h"
#include "core/param_table.h"
#include "precision/policy.h"

namespace mptrain {

// Which kind of GEMM reads a parameter: none (biases, LayerNorms, position tables), a linear
// layer (Policy rule Linear) or the tied LM head / MLM decoder (rule LmHead).
enum class GemmReader { None, Linear, LmHead };
using GemmReaderFn = GemmReader (*)(const ParamSpec&);

// The compute type of the GEMM that reads a weight (F32 for GemmReader::None).
ComputeType gemm_reader_compute(GemmReader reader, const Policy& policy);

// Bytes of the copies for a table under `policy` (0 when every GEMM is fp32: those read the
// master weights). Copies follow the table's order; consecutive table entries with copies of
// one type are packed back to back (BERT's query | key | value stay one [3C, C] operand), and
// each such run starts 64-byte aligned.
size_t weight_copy_bytes(const ParamTable& table, GemmReaderFn reader, const Policy& policy);

// A GEMM weight as its GEMMs read it: the copy, or the fp32 master when the GEMM is fp32.
struct WeightRef {
  const void* ptr = nullptr;
  StorageType type = StorageType::F32;
};

class WeightCopies {
 public:
  // Carves the buffer for `table` in `memory` (the backend's; copies stale after). Holds no pointer to the
  // table or the parameters, so the owning model stays movable.
  void setup(const ParamTable& table, GemmReaderFn reader, const Policy& policy,
             MemoryResource& memory = host_memory());
  // The operand for parameter `name` of the same table, whose master values live in params.
  WeightRef ref(const ParamTable& table, const std::string& name, const float* params) const;
  // The tensor a pass reads for the parameter at `master` (a pointer into params at the start of
  // a table entry): its copy, or the master itself, as a view of `dims`.
  View view(const float* master, const float* params, std::initializer_list<std::int64_t> dims) const;
  void mark_stale() { operands_stale_ = small_stale_ = true; }
  bool stale() const { return operands_stale_ || small_stale_; }
  bool operands_stale() const { return operands_stale_; }
  // Rebuilds every stale copy from params.
  void refresh_if_stale(const float* params, Backend& be);
  // The refresh of the GEMM operands' copies, as the to_operand ops it runs (src in params): what an
  // optimizer update may write in its own pass (AdamWArgs::copy), saying so with operands_written().
  // The small weights' rounded copies (a GPU plan's) are not among them and stay for the refresh.
  std::vector<ToOperandArgs> operand_refresh(const float* params);
  void operands_written() { operands_stale_ = false; }
  size_t bytes() const { return buf_.size() * sizeof(float); }

 private:
  friend size_t weight_copy_bytes(const ParamTable&, GemmReaderFn, const Policy&);
  struct Entry {
    size_t offset = 0;                   // bytes into buf_
    size_t param_offset = 0, numel = 0;  // the master tensor, in elements
    StorageType type = StorageType::F32;
    ComputeType compute = ComputeType::F32;  // the reading GEMM's arithmetic (F32: a rounded small weight)
    bool copied = false;                     // false: read from the master
  };
  WeightRef read(const Entry& e, const float* params) const;
  // Entry e's copy (dst) and its master in params (src), with its GEMM's arithmetic.
  ToOperandArgs refresh_of(const Entry& e, const float* params);
  // The layout (bytes in all; entries, one per table spec, when non-null).
  static size_t layout(const ParamTable& table, GemmReaderFn reader, const Policy& policy,
                       std::vector<Entry>* entries);
  std::vector<Entry> entries_;  // one per table spec
  FloatBuffer buf_;
  bool operands_stale_ = true, small_stale_ = true;
};

}  // namespace mptrain
