// A CPU backend whose memory the host cannot touch, as if it were a GPU's: every allocation is
// its own mmap'd pages, PROT_NONE except while one of the backend's ops, or an upload, download
// or zero, runs. A host read or write of that memory anywhere else faults (the test dies with
// SIGSEGV), and every tensor and index pointer an op is given must lie in it (else the op
// throws, naming the op). A model and step that run here touch their tensors only through the
// op interface and the explicit staging and download points — what a device backend needs —
// and, since the kernels are the CPU's, they must produce the CPU backend's bits.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/buffer.h"
#include "core/error.h"

namespace mptrain::test {

class FencedMemory final : public MemoryResource {
 public:
  // While an Open lives, the host may touch every allocation (nested: the outermost closes).
  class Open {
   public:
    explicit Open(FencedMemory& m) : m_(m) {
      if (m_.open_++ == 0) m_.protect(PROT_READ | PROT_WRITE);
    }
    ~Open() {
      if (--m_.open_ == 0) m_.protect(PROT_NONE);
    }
    Open(const Open&) = delete;
    Open& operator=(const Open&) = delete;

   private:
    FencedMemory& m_;
  };

  ~FencedMemory() override {
    for (const auto& [p, bytes] : regions_) munmap(p, bytes);
  }
  void* allocate(size_t bytes) override {
    if (bytes == 0) return nullptr;
    const size_t len = pages(bytes);
    void* p = mmap(nullptr, len, open_ > 0 ? PROT_READ | PROT_WRITE : PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);  // zero-filled
    if (p == MAP_FAILED) throw Error("fenced memory: mmap of " + std::to_string(len) + " bytes failed");
    regions_[static_cast<char*>(p)] = len;
    return p;
  }
  void release(void* p, size_t) noexcept override {
    const auto it = regions_.find(static_cast<char*>(p));
    if (it == regions_.end()) return;
    munmap(it->first, it->second);
    regions_.erase(it);
  }
  void zero(void* p, size_t bytes) override {
    mark('T');
    const Open o(*this);
    std::memset(p, 0, bytes);
  }
  void upload(void* dst, const void* host, size_t bytes) override {
    mark('T');
    const Open o(*this);
    if (bytes) std::memcpy(dst, host, bytes);
  }
  void download(void* host, const void* src, size_t bytes) override {
    mark('T');
    const Open o(*this);
    if (bytes) std::memcpy(host, src, bytes);
  }
  bool host_visible() const override { return false; }
  bool is_open() const { return open_ > 0; }
  // What reached the memory since the last take_trace(), runs collapsed: 'T' a host transfer
  // (upload, download or zero from the host), 'O' an op. A pass that stages, enqueues, then
  // reads leaves "TOT".
  void mark(char c) {
    if (trace_.empty() || trace_.back() != c) trace_ += c;
  }
  std::string take_trace() { return std::exchange(trace_, std::string()); }

  // Whether [p, p + bytes) lies inside one allocation.
  bool owns(const void* p, size_t bytes = 1) const {
    const char* c = static_cast<const char*>(p);
    auto it = regions_.upper_bound(const_cast<char*>(c));
    if (it == regions_.begin()) return false;
    --it;
    return c >= it->first && c + bytes <= it->first + it->second;
  }

 private:
  static size_t pages(size_t bytes) {
    const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return (bytes + page - 1) / page * page;
  }
  void protect(int prot) {
    for (const auto& [p, bytes] : regions_)
      if (mprotect(p, bytes, prot) != 0) throw Error("fenced memory: mprotect failed");
  }
  std::map<char*, size_t> regions_;
  int open_ = 0;
  std::string trace_;
};

class FencedCpuBackend final : public cpu::CpuBackend {
 public:
  using cpu::CpuBackend::CpuBackend;
  MemoryResource& memory() override { return mem_; }
  std::string take_trace() { return mem_.take_trace(); }

 protected:
  void run_zero(const View& v) override {
    const Guard g(*this, "zero", {&v});
    CpuBackend::run_zero(v);
  }
  // Every op: its views (the Args' own list, index arrays included) in the backend's memory.
#define MPTRAIN_FENCED_RUN(A)                                   \
  op_result_t<A> run(const A& a) override {                     \
    const Guard g(*this, backend_op_name(a.op()), views_of(a)); \
    return CpuBackend::run(a);                                  \
  }
  MPTRAIN_OP_ARGS(MPTRAIN_FENCED_RUN)
#undef MPTRAIN_FENCED_RUN

 private:
  // Opens the memory for one op after checking that each of its tensors lies in it. An op the
  // CPU backend runs inside another (over fp32 copies it widened on the host) is not checked.
  class Guard {
   public:
    template <class Views>
    Guard(FencedCpuBackend& be, const char* op, const Views& views)
        : be_(be), op_(op), nested_(be.mem_.is_open()), open_(be.mem_) {
      if (nested_) return;
      be.mem_.mark('O');
      for (const auto& entry : views) check(*view_of(entry));
    }
    Guard(FencedCpuBackend& be, const char* op, std::initializer_list<const View*> views)
        : Guard(be, op, std::vector<const View*>(views)) {}

   private:
    static const View* view_of(const View* v) { return v; }
    static const View* view_of(const ArgView& v) { return v.view; }
    void check(const View& v) const {
      if (!v.empty() && !be_.mem_.owns(v.ptr, v.contiguous() ? v.bytes() : 1))
        throw Error(std::string("[fenced] ") + op_ + ": tensor " + v.describe() +
                    " is not in the backend's memory");
    }
    FencedCpuBackend& be_;
    const char* op_;
    bool nested_;
    FencedMemory::Open open_;
  };
  FencedMemory mem_;
};

}  // namespace mptrain::test
