// The host's memory resource (core/buffer.h).
#include "core/buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

namespace mptrain {

namespace {

class HostMemory final : public MemoryResource {
 public:
  void* allocate(size_t bytes) override {
    if (bytes == 0) return nullptr;
    void* p = std::aligned_alloc(64, bytes);
    if (!p) throw Error("out of memory allocating " + std::to_string(bytes >> 20) + " MiB");
    std::memset(p, 0, bytes);
    return p;
  }
  void release(void* p, size_t) noexcept override { std::free(p); }
  void zero(void* p, size_t bytes) override { std::memset(p, 0, bytes); }
  // The whole pages inside [p, p + bytes) go back to the kernel (MADV_DONTNEED: private anonymous
  // memory, as malloc's heap and its mmap'd chunks are, reads as zero-filled pages afterwards and
  // is resident again only where written); the partial pages at the ends, which other data may
  // share, are zeroed.
  void discard(void* p, size_t bytes) override {
    static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t lo = reinterpret_cast<uintptr_t>(p), hi = lo + bytes;
    const uintptr_t first = (lo + page - 1) / page * page, last = hi / page * page;
    if (first >= last || madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED) != 0) {
      std::memset(p, 0, bytes);
      return;
    }
    std::memset(p, 0, first - lo);
    std::memset(reinterpret_cast<void*>(last), 0, hi - last);
  }
  void upload(void* dst, const void* host, size_t bytes) override {
    if (bytes) std::memmove(dst, host, bytes);
  }
  void download(void* host, const void* src, size_t bytes) override {
    if (bytes) std::memmove(host, src, bytes);
  }
  bool host_visible() const override { return true; }
};

}  // namespace

MemoryResource& host_memory() {
  static HostMemory memory;
  return memory;
}

}  // namespace mptrain
