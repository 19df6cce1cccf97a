// The GEMM weight copies: carving, lookup and the refresh from the master weights.
#include "model/weight_copies.h"

#include "core/error.h"

namespace mptrain {

ComputeType gemm_reader_compute(GemmReader reader, const Policy& policy) {
  switch (reader) {
    case GemmReader::Linear:
      return policy.rule(OpKind::Linear).compute;
    case GemmReader::LmHead:
      return policy.rule(OpKind::LmHead).compute;
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
// query | key | value, stay one operand), and every run starts 64-byte aligned.
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
    if (c == ComputeType::F32) {  // fp32 GEMMs read the master weights
      run = false;
      continue;
    }
    const StorageType t = policy.operand(r == GemmReader::LmHead ? OpKind::LmHead : OpKind::Linear);
    if (!(run && t == run_type)) bytes = aligned(bytes);
    if (entries) (*entries)[s] = {bytes, spec.offset, spec.numel, t, c};
    bytes += spec.numel * storage_bytes(t);
    run = true;
    run_type = t;
  }
  return aligned(bytes);
}

size_t weight_copy_bytes(const ParamTable& table, GemmReaderFn reader, const Policy& policy) {
  return WeightCopies::layout(table, reader, policy, nullptr);
}

void WeightCopies::setup(const ParamTable& table, GemmReaderFn reader, const Policy& policy) {
  const size_t bytes = layout(table, reader, policy, &entries_);
  buf_.resize(bytes / sizeof(float));
  stale_ = true;
}

WeightRef WeightCopies::ref(const ParamTable& table, const std::string& name, const float* params) const {
  const ParamSpec& spec = table.get(name);
  const size_t s = static_cast<size_t>(&spec - table.specs().data());
  MPT_CHECK(s < entries_.size(), "weight copies used before setup");
  const Entry& e = entries_[s];
  if (e.compute == ComputeType::F32) return {params + spec.offset, StorageType::F32};
  return {reinterpret_cast<const char*>(buf_.data()) + e.offset, e.type};
}

void WeightCopies::refresh_if_stale(const float* params, Backend& be) {
  if (!stale_) return;
  for (const Entry& e : entries_) {
    if (e.compute == ComputeType::F32) continue;
    const auto n = static_cast<std::int64_t>(e.numel);
    be.to_operand(View::of(reinterpret_cast<char*>(buf_.data()) + e.offset, e.type, {n}),
                  View::of(params + e.param_offset, StorageType::F32, {n}), e.compute);
  }
  stale_ = false;
}

}  // namespace mptrain
