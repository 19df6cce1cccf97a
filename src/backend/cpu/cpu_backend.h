// The CPU backend of the op interface (backend/backend.h): thin routing onto the cpu:: ops
// (oneDNN GEMMs, OpenMP kernels). Every product goes through gemm_mixed, which reads an operand
// in place when it is already in the arithmetic's format (an fp32 policy's, always) and converts
// it once otherwise.
#pragma once
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/ops/attention.h"
#include "backend/ops/gemm_mixed.h"
#include "core/buffer.h"

namespace mptrain::cpu {

class Context;

class CpuBackend : public Backend {
 public:
  // Shares the caller's Context (thread pool and oneDNN primitive caches).
  explicit CpuBackend(Context& ctx);
  ~CpuBackend() override;

  const char* name() const override { return "cpu"; }
  BackendCaps caps() const override { return ws_.caps(); }
  // The residual add fuses into the projection's epilogue here (one pass over the fp32
  // The probabilities P [B, NH, T, T] in types.probs, and fp32 scores (+ dS) as scratch.
  AttentionBytes attention_bytes(int B, int T, int C, int NH, const AttentionDtypes& types) const override;
  MemoryResource& memory() override { return host_memory(); }

 protected:
  bool can_run(Op op, std::initializer_list<StorageType> types, ComputeType math) const override;
  void run_cast(const View& dst, const View& src) override;
  void run_zero(const View& v) override;
  void run_accumulate(const View& dst, const View& src) override;
  void run_to_operand(const View& dst, const View& src, ComputeType math) override;
  void run_linear(const LinearArgs& a) override;
  void run_linear_backward(const LinearBackwardArgs& a) override;
  void run_layernorm(const LayerNormArgs& a) override;
  void run_layernorm_backward(const LayerNormBackwardArgs& a) override;
  void run_attention(const AttentionArgs& a) override;
  void run_attention_backward(const AttentionBackwardArgs& a) override;
  void run_cross_entropy(const CrossEntropyArgs& a) override;
  void run_embedding(const EmbeddingArgs& a) override;
  void run_embedding_backward(const EmbeddingBackwardArgs& a) override;
  void run_gather_rows(const View& dst, const View& src, const int* rows, int count) override;
  void run_scatter_add_rows(const View& dst, const View& src, const int* rows, int count) override;
  void run_argmax_rows(int* best, const View& x, int n, int count) override;
  void run_adamw(const AdamWArgs& a) override;
  void run_sophia(const SophiaArgs& a) override;
  void run_sophia_hessian(const View& h, const View& ghat, float beta2) override;
  std::int64_t run_count_unclipped(const View& m, const View& h, float rho_b) override;
  bool run_unscale_and_check(const View& grads, float inv_scale) override;
  double run_sum_squares(const View& x) override;
  void run_scale(const View& x, float factor) override;
  void run_matmul(const MatmulArgs& a) override;
  void run_muon_momentum(const MuonMomentumArgs& a) override;
  void run_muon_update(const MuonUpdateArgs& a) override;

 private:
  // Scratch that grows to the largest need and stays: i = 0 the GEMM's fp32 accumulator, 1 a
  // converted-once upstream gradient.
  void* scratch(int i, size_t bytes);
  // The caller's scratch when it holds `bytes`, else scratch(i, bytes).
  void* scratch_or_own(const View& given, int i, size_t bytes);
  // The attention's dtypes as the cpu:: kernels take them (dS in the scores' operand storage).
  AttentionTypes typed(const AttentionDtypes& t) const;
  Context& ctx_;
  GemmWorkspace ws_;
  FloatBuffer scratch_[2];
  std::vector<FloatBuffer> wide_;  // the fp32 copies of 16-bit tensors widened around a kernel
};

}  // namespace mptrain::cpu
