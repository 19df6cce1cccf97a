// Activations planned once per (B, T): a named table of typed buffers carved from one
// allocation. Entries are addressed by the handle add() returns, so the model's forward and
// backward name every buffer they touch. Each entry records its storage dtype (bytes, not
// floats: bf16/fp16 activations take half the room), the op that writes it, and whether
// backward reads it (Saved) or it is reused freely (Scratch). `mptrain explain` sums the same
// table, built without allocating.
#pragma once
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/view.h"
#include "core/buffer.h"
#include "core/dtype.h"
#include "precision/policy.h"

namespace mptrain {

// A micro-batch's shape checked against a model's context (block_size positions): Error naming
// the problem, before any plan is built.
void check_batch_shape(int B, int T, int block_size);

class ActivationPlan {
 public:
  using Handle = size_t;
  static constexpr Handle kNone = static_cast<Handle>(-1);  // a buffer this plan does not have
  enum class Role { Saved, Scratch };
  struct Entry {
    std::string name;
    size_t offset;  // bytes from the start of the allocation (a multiple of 64)
    size_t numel;
    StorageType type;
    OpRole op;  // the op that writes it
    Role role;
    size_t bytes() const { return numel * storage_bytes(type); }
  };

  // Registers numel elements of `type` (each entry starts 64-byte aligned).
  Handle add(std::string name, size_t numel, StorageType type, OpRole op, Role role);
  // One allocation for everything added so far, in `memory` (the backend's).
  void allocate(MemoryResource& memory = host_memory());
  bool allocated() const { return buffer_.size() > 0 || total_ == 0; }

  // An fp32 entry's data (host code may read it only when the plan is in host memory); throws
  // Error for an entry of another dtype.
  float* get(Handle h);
  void* raw(Handle h) { return reinterpret_cast<char*>(buffer_.data()) + entries_[h].offset; }
  // Typed views of an entry for the op interface: [rows, cols] or [n] from its start, and the
  // whole entry as working memory (empty for kNone).
  View view(Handle h, std::int64_t rows, std::int64_t cols) {
    return View::of(raw(h), type(h), {rows, cols});
  }
  View row(Handle h, std::int64_t n) { return View::of(raw(h), type(h), {n}); }
  View work(Handle h) {
    return h == kNone ? View{} : View::of(raw(h), type(h), {static_cast<std::int64_t>(entries_[h].numel)});
  }
  StorageType type(Handle h) const { return entries_[h].type; }
  // The first n values of an entry for the host, in fp32 (a pass's download point): the entry
  // itself when it is fp32 in host memory; else widened by `be` when 16-bit (a GPU plan's
  // logits) and brought into the host buffer `host`.
  const float* read_f32(Handle h, size_t n, Backend& be, FloatBuffer& host);

  size_t total_bytes() const { return total_; }
  size_t bytes(Role role) const;  // sum of entry sizes with that role (without alignment padding)
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  std::vector<Entry> entries_;
  size_t total_ = 0;
  FloatBuffer buffer_;
  FloatBuffer widened_;  // read_f32's fp32 values in the backend's memory, before the download
};

// A layer's tensors under --recompute (model/recompute.h): each one the layer's own, kept for the
// backward, or — what the set names — one buffer every layer shares as scratch
// ("recomputed_<name>", added by the first layer that asks), which the backward refills before it
// reads it.
class LayerTensors {
 public:
  explicit LayerTensors(ActivationPlan& plan) : plan_(plan) {}
  // `prefix + name`, saved; or, shared, the one "recomputed_" + name every layer gets.
  ActivationPlan::Handle add(bool shared, const std::string& prefix, const std::string& name, size_t numel,
                             StorageType type, OpRole op);

 private:
  ActivationPlan& plan_;
  std::map<std::string, ActivationPlan::Handle> shared_;  // by name
};

}  // namespace mptrain
