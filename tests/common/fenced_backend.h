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
  void run_cast(const View& dst, const View& src) override {
    const Guard g(*this, "cast", {&dst, &src});
    CpuBackend::run_cast(dst, src);
  }
  void run_zero(const View& v) override {
    const Guard g(*this, "zero", {&v});
    CpuBackend::run_zero(v);
  }
  void run_accumulate(const View& dst, const View& src) override {
    const Guard g(*this, "accumulate", {&dst, &src});
    CpuBackend::run_accumulate(dst, src);
  }
  void run_to_operand(const View& dst, const View& src, ComputeType math) override {
    const Guard g(*this, "to_operand", {&dst, &src});
    CpuBackend::run_to_operand(dst, src, math);
  }
  void run_linear(const LinearArgs& a) override {
    const Guard g(*this, "linear", {&a.out, &a.x, &a.w, &a.bias, &a.pre, &a.residual, &a.scratch});
    CpuBackend::run_linear(a);
  }
  void run_linear_backward(const LinearBackwardArgs& a) override {
    const Guard g(*this, "linear_backward", {&a.dx, &a.dw, &a.db, &a.dy, &a.x, &a.w, &a.pre, &a.scratch});
    CpuBackend::run_linear_backward(a);
  }
  void run_layernorm(const LayerNormArgs& a) override {
    const Guard g(*this, "layernorm",
                  {&a.out, &a.mean, &a.rstd, &a.x, &a.gamma, &a.beta});
    CpuBackend::run_layernorm(a);
  }
  void run_layernorm_backward(const LayerNormBackwardArgs& a) override {
    const Guard g(*this, "layernorm_backward",
                  {&a.dx, &a.dgamma, &a.dbeta, &a.dout, &a.x, &a.gamma, &a.mean, &a.rstd});
    CpuBackend::run_layernorm_backward(a);
  }
  void run_attention(const AttentionArgs& a) override {
    const Guard g(*this, "attention", {&a.out, &a.qkv, &a.saved, &a.scratch});
    g.ids(a.key_mask);
    CpuBackend::run_attention(a);
  }
  void run_attention_backward(const AttentionBackwardArgs& a) override {
    const Guard g(*this, "attention_backward", {&a.dqkv, &a.dout, &a.qkv, &a.saved, &a.scratch});
    CpuBackend::run_attention_backward(a);
  }
  void run_cross_entropy(const CrossEntropyArgs& a) override {
    const Guard g(*this, "cross_entropy", {&a.losses, &a.dlogits, &a.logits, &a.dloss});
    g.ids(a.targets);
    g.ids(a.sampled);
    CpuBackend::run_cross_entropy(a);
  }
  void run_embedding(const EmbeddingArgs& a) override {
    const Guard g(*this, "embedding", {&a.out, &a.word, &a.pos, &a.type_table});
    g.ids(a.tokens);
    g.ids(a.types);
    CpuBackend::run_embedding(a);
  }
  void run_embedding_backward(const EmbeddingBackwardArgs& a) override {
    const Guard g(*this, "embedding_backward", {&a.dword, &a.dpos, &a.dtype, &a.dout});
    g.ids(a.tokens);
    g.ids(a.types);
    CpuBackend::run_embedding_backward(a);
  }
  void run_gather_rows(const View& dst, const View& src, const int* rows, int count) override {
    const Guard g(*this, "gather_rows", {&dst, &src});
    g.ids(rows);
    CpuBackend::run_gather_rows(dst, src, rows, count);
  }
  void run_scatter_add_rows(const View& dst, const View& src, const int* rows, int count) override {
    const Guard g(*this, "scatter_add_rows", {&dst, &src});
    g.ids(rows);
    CpuBackend::run_scatter_add_rows(dst, src, rows, count);
  }
  void run_argmax_rows(int* best, const View& x, int n, int count) override {
    const Guard g(*this, "argmax_rows", {&x});
    g.ids(best);
    CpuBackend::run_argmax_rows(best, x, n, count);
  }
  void run_adamw(const AdamWArgs& a) override {
    const Guard g(*this, "adamw", {&a.params, &a.grads, &a.m, &a.v});
    g.ids(a.decay_mask);
    CpuBackend::run_adamw(a);
  }
  void run_sophia(const SophiaArgs& a) override {
    const Guard g(*this, "sophia", {&a.params, &a.grads, &a.m, &a.h});
    g.ids(a.decay_mask);
    CpuBackend::run_sophia(a);
  }
  void run_sophia_hessian(const View& h, const View& ghat, float beta2) override {
    const Guard g(*this, "sophia_hessian", {&h, &ghat});
    CpuBackend::run_sophia_hessian(h, ghat, beta2);
  }
  std::int64_t run_count_unclipped(const View& m, const View& h, float rho_b) override {
    const Guard g(*this, "count_unclipped", {&m, &h});
    return CpuBackend::run_count_unclipped(m, h, rho_b);
  }
  bool run_unscale_and_check(const View& grads, float inv_scale) override {
    const Guard g(*this, "unscale_and_check", {&grads});
    return CpuBackend::run_unscale_and_check(grads, inv_scale);
  }
  double run_sum_squares(const View& x) override {
    const Guard g(*this, "sum_squares", {&x});
    return CpuBackend::run_sum_squares(x);
  }
  void run_scale(const View& x, float factor) override {
    const Guard g(*this, "scale", {&x});
    CpuBackend::run_scale(x, factor);
  }
  void run_matmul(const MatmulArgs& a) override {
    const Guard g(*this, "matmul", {&a.c, &a.a, &a.b});
    CpuBackend::run_matmul(a);
  }
  void run_muon_momentum(const MuonMomentumArgs& a) override {
    const Guard g(*this, "muon_momentum", {&a.m, &a.grads, &a.u});
    CpuBackend::run_muon_momentum(a);
  }
  void run_muon_update(const MuonUpdateArgs& a) override {
    const Guard g(*this, "muon_update", {&a.params, &a.o});
    CpuBackend::run_muon_update(a);
  }

 private:
  // Opens the memory for one op after checking that each of its tensors lies in it. An op the
  // CPU backend runs inside another (over fp32 copies it widened on the host) is not checked.
  class Guard {
   public:
    Guard(FencedCpuBackend& be, const char* op, std::initializer_list<const View*> views)
        : be_(be), op_(op), nested_(be.mem_.is_open()), open_(be.mem_) {
      if (nested_) return;
      be.mem_.mark('O');
      for (const View* v : views)
        if (!v->empty() && !be.mem_.owns(v->ptr, v->contiguous() ? v->bytes() : 1))
          throw Error(std::string("[fenced] ") + op + ": tensor " + v->describe() +
                      " is not in the backend's memory");
    }
    void ids(const void* p) const {
      if (!nested_ && p && !be_.mem_.owns(p))
        throw Error(std::string("[fenced] ") + op_ + ": ids or a mask not in the backend's memory");
    }

   private:
    FencedCpuBackend& be_;
    const char* op_;
    bool nested_;
    FencedMemory::Open open_;
  };
  FencedMemory mem_;
};

}  // namespace mptrain::test
