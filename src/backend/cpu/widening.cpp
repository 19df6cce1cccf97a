// Widen → fp32 kernel → round (backend/cpu/widening.h).
#include "backend/cpu/widening.h"

#include "backend/ops/convert.h"
#include "core/error.h"

namespace mptrain::cpu {

namespace {

// The elements a view spans, from its first to its last (rank 0 or an empty dimension: 0).
size_t view_extent(const View& v) {
  if (v.empty() || v.rank == 0) return 0;
  size_t last = 0;
  for (int i = 0; i < v.rank; ++i) {
    if (v.shape[i] == 0) return 0;
    last += static_cast<size_t>(v.shape[i] - 1) * static_cast<size_t>(v.stride[i]);
  }
  return last + 1;
}

}  // namespace

Widening::Copy& Widening::copy_of(const View& v) {
  const size_t extent = view_extent(v);
  for (Copy& c : copies_)
    if (c.original.ptr == v.ptr) {
      MPT_CHECK(c.original.type == v.type && c.extent == extent,
                "[backend cpu] widening: two views of one address with different types or extents (" +
                    c.original.describe() + ", " + v.describe() + ")");
      return c;
    }
  if (pool_.size() <= copies_.size()) pool_.resize(copies_.size() + 1);
  FloatBuffer& buf = pool_[copies_.size()];
  if (buf.size() < extent) buf.resize(extent);
  convert(buf.data(), StorageType::F32, v.ptr, v.type, extent);
  copies_.push_back({v, buf.data(), extent, false});
  return copies_.back();
}

View Widening::read(const View& v) {
  if (v.empty() || v.type == StorageType::F32) return v;
  View wide = v;
  wide.ptr = copy_of(v).wide;
  wide.type = StorageType::F32;
  return wide;
}

View Widening::write(const View& v) {
  const View wide = read(v);
  if (wide.ptr != v.ptr) copy_of(v).written = true;
  return wide;
}

void Widening::commit() {
  for (Copy& c : copies_)
    if (c.written) convert(c.original.ptr, c.original.type, c.wide, StorageType::F32, c.extent);
  copies_.clear();
}

}  // namespace mptrain::cpu
