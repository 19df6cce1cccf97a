// The GEMM weight copies: carving, lookup and the refresh from the master weights.
#include "model/weight_copies.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace mptrain {

ComputeType gemm_reader_compute(GemmReader reader, const Policy& policy) {
  switch (reader) {
    case GemmReader::Linear:
      return policy.rule(OpRole::Linear).compute;
    case GemmReader::LmHead:
      return policy.rule(OpRole::LmHead).compute;
    case GemmReader::None:
      break;
  }
  return ComputeType::F32;
}

namespace {

size_t aligned(size_t bytes) { return (bytes + 63) / 64 * 64; }

}  // namespace

// The layout: copies in parameter-table order; a run of copies of consecutive table entries
// in one storage type is packed (so that tensors the model multiplies as one, like BERT's
// query | key | value, stay one operand), and every run starts 64-byte aligned. Under a GPU's
// plan the weights no GEMM reads get copies too, in the policy's small_weights storage.
size_t WeightCopies::layout(const ParamTable& table, GemmReaderFn reader, const Policy& policy,
                            std::vector<Entry>* entries) {
  if (entries) entries->assign(table.specs().size(), Entry{});
  size_t bytes = 0;
  bool run = false;  // the previous table entry has a copy of type `run_type`
  StorageType run_type = StorageType::F32;
  for (size_t s = 0; s < table.specs().size(); ++s) {
    const ParamSpec& spec = table.specs()[s];
    const GemmReader r = reader(spec);
    const ComputeType c = gemm_reader_compute(r, policy);
    const bool small = r == GemmReader::None && policy.small_weights != StorageType::F32;
    if (entries) (*entries)[s] = {0, spec.offset, spec.numel, StorageType::F32, c, false};
    if (c == ComputeType::F32 && !small) {  // fp32 GEMMs and fp32 small weights read the masters
      run = false;
      continue;
    }
    const StorageType t = small ? policy.small_weights
                                : policy.operand(r == GemmReader::LmHead ? OpRole::LmHead : OpRole::Linear);
    if (!(run && t == run_type)) bytes = aligned(bytes);
    if (entries) (*entries)[s] = {bytes, spec.offset, spec.numel, t, c, true};
    bytes += spec.numel * storage_bytes(t);
    run = true;
    run_type = t;
  }
  return aligned(bytes);
}

size_t weight_copy_bytes(const ParamTable& table, GemmReaderFn reader, const Policy& policy) {
  return WeightCopies::layout(table, reader, policy, nullptr);
}

void WeightCopies::setup(const ParamTable& table, GemmReaderFn reader, const Policy& policy,
                         MemoryResource& memory) {
  const size_t bytes = layout(table, reader, policy, &entries_);
  buf_.resize(bytes / sizeof(float), memory);
  mark_stale();
}

WeightRef WeightCopies::ref(const ParamTable& table, const std::string& name, const float* params) const {
  const ParamSpec& spec = table.get(name);
  const size_t s = static_cast<size_t>(&spec - table.specs().data());
  MPT_CHECK(s < entries_.size(), "weight copies used before setup");
  return read(entries_[s], params);
}

WeightRef WeightCopies::read(const Entry& e, const float* params) const {
  if (!e.copied) return {params + e.param_offset, StorageType::F32};
  return {reinterpret_cast<const char*>(buf_.data()) + e.offset, e.type};
}

View WeightCopies::view(const float* master, const float* params,
                        std::initializer_list<std::int64_t> dims) const {
  const size_t offset = static_cast<size_t>(master - params);
  const auto it = std::lower_bound(entries_.begin(), entries_.end(), offset,
                                   [](const Entry& e, size_t o) { return e.param_offset < o; });
  MPT_CHECK(it != entries_.end() && it->param_offset == offset,
            "weight copies: no parameter starts at offset " + std::to_string(offset));
  const WeightRef r = read(*it, params);
  return View::of(r.ptr, r.type, dims);
}

ToOperandArgs WeightCopies::refresh_of(const Entry& e, const float* params) {
  const auto n = static_cast<std::int64_t>(e.numel);
  return {View::of(reinterpret_cast<char*>(buf_.data()) + e.offset, e.type, {n}),
          View::of(params + e.param_offset, StorageType::F32, {n}), e.compute};
}

std::vector<ToOperandArgs> WeightCopies::operand_refresh(const float* params) {
  std::vector<ToOperandArgs> ops;
  for (const Entry& e : entries_)
    if (e.copied && e.compute != ComputeType::F32) ops.push_back(refresh_of(e, params));
  return ops;
}

void WeightCopies::refresh_if_stale(const float* params, Backend& be) {
  if (operands_stale_)
    for (const ToOperandArgs& op : operand_refresh(params)) be.to_operand(op.dst, op.src, op.math);
  if (small_stale_)
    for (const Entry& e : entries_)
      if (e.copied && e.compute == ComputeType::F32) {
        const ToOperandArgs op = refresh_of(e, params);
        be.cast(op.dst, op.src);  // a small weight: rounded once
      }
  operands_stale_ = small_stale_ = false;
}

}  // namespace mptrain
