// The host's memory resource (core/buffer.h).
#include "core/buffer.h"

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
