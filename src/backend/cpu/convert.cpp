// Flat-buffer dtype conversions: OpenMP over chunks, the span conversions of lowp.h inside.
#include "backend/ops/convert.h"

#include <cstring>
#include <type_traits>

#include "backend/cpu/lowp.h"

namespace mptrain::cpu {

void convert(void* dst, StorageType dt, const void* src, StorageType st, size_t n) {
  if (n == 0 || (dst == src && dt == st)) return;
  if (dt == st) {
    std::memcpy(dst, src, n * storage_bytes(dt));
    return;
  }
  const std::ptrdiff_t chunks = static_cast<std::ptrdiff_t>((n + kChunk - 1) / kChunk);
  dispatch_storage(dt, [&](auto dtag) {
    using D = decltype(dtag);
    dispatch_storage(st, [&](auto stag) {
      using S = decltype(stag);
#pragma omp parallel for schedule(static)
      for (std::ptrdiff_t c = 0; c < chunks; ++c) {
        const size_t i0 = static_cast<size_t>(c) * kChunk, len = n - i0 < kChunk ? n - i0 : kChunk;
        const S* s = static_cast<const S*>(src) + i0;
        D* d = static_cast<D*>(dst) + i0;
        if constexpr (std::is_same_v<S, float>) {
          narrow_span(d, s, len);
        } else if constexpr (std::is_same_v<D, float>) {
          widen_span(d, s, len);
        } else {
          float tmp[kChunk];
          widen_span(tmp, s, len);
          narrow_span(d, tmp, len);
        }
      }
    });
  });
}

}  // namespace mptrain::cpu
