// The CUDA backend of the op interface (backend/backend.h): routing onto this folder's launchers
// (cuBLASLt GEMMs with their epilogues, flash or naive attention, the fused loss, LayerNorm,
// embeddings, rows, the optimizer kernels), on one device and one stream, in device memory
// (DeviceMemoryResource: what Backend::memory() hands the models and the optimizer).
//
// Its kernels take one storage type per launch (llm.c's plan, which make_policy builds from
// kCudaCaps): supports() accepts a call when every tensor of an op shares one type T, with the
// exceptions the launchers serve (fp32 master gradients from 16-bit GEMM operands, casts,
// widening accumulation, the bias in the type the GEMM's epilogue reads). Anything else is refused when the
// model is built, naming the op. No CUDA type appears here, so host code that only builds a backend needs no
// CUDA headers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/context.h"
#include "backend/cuda/device_buffer.h"
#include "backend/device.h"

namespace mptrain::cuda {

// cudaMalloc'd memory, zeroed, with stream-ordered copies that the host waits for. Without a
// context (a sizing-only backend) every allocation is refused.
class DeviceMemoryResource final : public MemoryResource {
 public:
  explicit DeviceMemoryResource(Context* ctx) : ctx_(ctx) {}
  void* allocate(size_t bytes) override;
  void release(void* p, size_t bytes) noexcept override;
  void zero(void* p, size_t bytes) override;
  void upload(void* dst, const void* host, size_t bytes) override;
  void download(void* host, const void* src, size_t bytes) override;
  bool host_visible() const override { return false; }

 private:
  Context& ctx() const;
  Context* ctx_;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device = 0, CudaOptions options = {});
  // A backend without a device, on any machine: it answers what a plan or an estimate asks
  // (caps, fusions, operand types, attention_bytes); its memory refuses every allocation, so no
  // model can be built on it.
  static std::unique_ptr<CudaBackend> sizing_only();
  ~CudaBackend() override;

  const char* name() const override { return "cuda"; }
  BackendCaps caps() const override { return kCudaCaps; }
  // Flash attention where its kernels take the shape (16-bit, head size 64 or 128): it saves
  // out and the row log-sum-exps; elsewhere the naive path saves the probabilities.
  AttentionBytes attention_bytes(int B, int T, int C, int NH, const AttentionDtypes& types) const override;
  // cuBLASLt's epilogue rounds the accumulator in registers: LinearArgs::scratch goes unused.
  bool linear_uses_scratch() const override { return false; }
  MemoryResource& memory() override { return mem_; }
  Context& context() { return *ctx_; }

 protected:
  bool can_run(const OpTypes& t) const override;
  void run_zero(const View& v) override;
#define MPTRAIN_CUDA_RUN(A) op_result_t<mptrain::A> run(const mptrain::A& a) override;
  MPTRAIN_OP_ARGS(MPTRAIN_CUDA_RUN)
#undef MPTRAIN_CUDA_RUN
  // Stream capture into a CUDA graph (graph.cpp).
  void run_begin_capture() override;
  void run_wait() override;  // the op profile's fence: the stream drained
  std::unique_ptr<Graph> run_end_capture() override;

 private:
  // Device memory that grows to the largest need and stays (never inside a steady-state step:
  // shapes repeat). Slots: see cuda_backend.cpp.
  void* scratch(int slot, size_t bytes);
  // An all-ones decay mask for n elements.
  const std::uint32_t* all_decay(size_t n);
  bool flash(int C, int NH, const AttentionDtypes& t) const;
  struct SizingOnly {};
  explicit CudaBackend(SizingOnly) : mem_(nullptr) {}

  std::unique_ptr<Context> ctx_;
  CudaOptions options_;
  DeviceMemoryResource mem_;
  static constexpr int kSlots = 11;
  DeviceMemory scratch_[kSlots];
  std::vector<DeviceMemory> retired_;  // scratch areas outgrown (see scratch())
  size_t mask_n_ = 0;                  // bits of all_decay()
};

}  // namespace mptrain::cuda
