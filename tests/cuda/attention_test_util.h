// What both GPU attention tests (the naive path, test_attention_gpu.cpp; flash attention,
// test_flash_attention_gpu.cpp) compare against: the CPU typed op run with every tensor (P and
// dS included) in the GPU's storage type T, on inputs rounded to T.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/cuda/gemm.h"
#include "backend/ops/attention.h"
#include "backend/ops/convert.h"
#include "backend/ops/gemm.h"
#include "common/cpu_fp32.h"
#include "cuda/gpu_test_util.h"

namespace mptrain::gputest {

// The CPU arithmetic that matches the GPU's for storage type t and math mode m.
inline ComputeType attention_cpu_math(StorageType t, ComputeType m) {
  if (t == StorageType::BF16) return ComputeType::BF16;
  if (t == StorageType::F16) return ComputeType::F16;
  return m == ComputeType::TF32 ? ComputeType::TF32 : ComputeType::F32;
}

struct AttentionReference {
  std::vector<float> y, p, dqkv;  // out [B,T,C], saved P [B,NH,T,T], dqkv [B,T,3C]
};

// Forward and backward of the CPU typed op: causal, or key-masked under mask[B,T] (null = none).
template <class T>
AttentionReference cpu_attention(int B, int Tn, int C, int NH, const std::vector<float>& qkv,
                                 const std::vector<float>& dout, const int* mask, bool causal, ComputeType m) {
  const StorageType t = cuda::storage_of<T>();
  const ComputeType math = attention_cpu_math(t, m);
  cpu::GemmWorkspace ws(cpu_ctx());
  const cpu::AttentionTypes ty{t, t, t, t, math, math};
  const size_t eb = storage_bytes(t), btc = static_cast<size_t>(B) * Tn * C;
  std::vector<char> q(qkv.size() * eb), y(btc * eb), d(dout.size() * eb), dq(qkv.size() * eb);
  std::vector<char> saved(cpu::attention_saved_bytes_typed(B, Tn, C, NH, ty));
  std::vector<float> scratch(cpu::attention_scratch_bytes_typed(B, Tn, C, NH, ty) / sizeof(float) + 1);
  cpu::convert(q.data(), t, qkv.data(), StorageType::F32, qkv.size());
  cpu::convert(d.data(), t, dout.data(), StorageType::F32, dout.size());
  if (causal) {
    cpu::attention_forward_typed(y.data(), saved.data(), q.data(), scratch.data(), ty, B, Tn, C, NH, ws, cpu_ctx());
    cpu::attention_backward_typed(dq.data(), d.data(), q.data(), saved.data(), scratch.data(), ty, B, Tn, C, NH, ws,
                                  cpu_ctx());
  } else {
    cpu::attention_forward_typed(y.data(), saved.data(), q.data(), scratch.data(), ty, B, Tn, C, NH, ws,
                                 cpu_ctx(), false, mask);
    cpu::attention_backward_typed(dq.data(), d.data(), q.data(), saved.data(), scratch.data(), ty, B, Tn, C,
                                  NH, ws, cpu_ctx(), false);
  }
  AttentionReference r{std::vector<float>(btc), std::vector<float>(static_cast<size_t>(B) * NH * Tn * Tn),
                       std::vector<float>(qkv.size())};
  cpu::convert(r.y.data(), StorageType::F32, y.data(), t, r.y.size());
  cpu::convert(r.p.data(), StorageType::F32, saved.data(), t, r.p.size());
  cpu::convert(r.dqkv.data(), StorageType::F32, dq.data(), t, r.dqkv.size());
  return r;
}

// Inputs rounded to T for a [B,T,C] activation (btc = B·T·C): qkv at scale 0.8 so that scores are
// of order a few units (the softmax neither flat nor one-hot), dout at scale 1.
template <class T>
void make_attention_inputs(size_t btc, uint64_t seed, std::vector<float>& qkv, std::vector<float>& dout) {
  qkv = rounded<T>(randn(3 * btc, seed, 0.8f));
  dout = rounded<T>(randn(btc, seed + 1));
}

}  // namespace mptrain::gputest
