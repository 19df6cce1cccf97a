// GPU op timings at GPT-2 124M sizes (B·T = 8192 tokens, C = 768, Vp = 50304): each fused op
// beside its unfused twin, the linear layer in every math mode, the naive attention, and the
// bandwidth-bound kernels in GB/s. CUDA events around `iters` launches after warm-up; one line per op.
// Built only with the CUDA backend (target bench_cuda_ops); run on a GPU machine:
//   build/bench_cuda_ops [iters]
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/activations.h"
#include "backend/cuda/adamw.h"
#include "backend/cuda/attention.h"
#include "backend/cuda/context.h"
#include "backend/cuda/crossentropy.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/embeddings.h"
#include "backend/cuda/flash_attention.h"
#include "backend/cuda/grad_norm.h"
#include "backend/cuda/layernorm.h"
#include "backend/cuda/residual.h"
#include "backend/cuda/sophia.h"
#include "backend/device.h"
#include "core/error.h"
#include "core/rng.h"
#include "cuda/device_array.h"
#include "cuda/linear_twin.h"

using namespace mptrain;
using namespace mptrain::cuda;

namespace {

int g_iters = 20;

double time_ms(Context& ctx, const std::function<void()>& f) {
  for (int i = 0; i < 3; ++i) f();
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaEventRecord(a, ctx.stream());
  for (int i = 0; i < g_iters; ++i) f();
  cudaEventRecord(b, ctx.stream());
  ctx.synchronize();
  float ms = 0.0f;
  cudaEventElapsedTime(&ms, a, b);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / g_iters;
}

void report(const std::string& name, double ms, double bytes, double flops) {
  std::printf("%-44s %9.3f ms", name.c_str(), ms);
  if (bytes > 0) std::printf("  %8.1f GB/s", bytes / ms / 1e6);
  if (flops > 0) std::printf("  %8.1f TFLOP/s", flops / ms / 1e9);
  std::printf("\n");
}

// Naive attention (attention.h) at GPT-2 124M sizes, causal, forward and backward. FLOPs count
// the full T×T products the naive path computes (2 products forward, 4 backward).
template <class T>
void bench_attention(Context& ctx, const std::string& p, const std::vector<ComputeType>& modes) {
  const int B = 8, Tn = 1024, C = 768, NH = 12;
  const StorageType st = std::is_same_v<T, float> ? StorageType::F32 : StorageType::BF16;
  const size_t BTC = static_cast<size_t>(B) * Tn * C;
  DeviceBuffer<T> qkv(3 * BTC), out(BTC), dout(BTC), dqkv(3 * BTC);
  DeviceBuffer<char> saved(attention_saved_bytes(B, Tn, C, NH, st)),
      scratch(attention_scratch_bytes(B, Tn, C, NH, st));
  for (auto* buf : {&qkv, &out, &dout, &dqkv}) buf->zero(ctx);
  const double fl = 2.0 * 2.0 * B * NH * static_cast<double>(Tn) * Tn * (C / NH);
  for (ComputeType m : modes) {
    const std::string mp = p + (std::is_same_v<T, float> ? std::string("/") + compute_name(m) : "");
    report("attention fwd (naive, B=8 T=1024 NH=12)" + mp,
           time_ms(ctx,
                   [&] {
                     attention_forward<T>(out.data(), saved.data(), qkv.data(), AttentionKeys::causal(),
                                          scratch.data(), B, Tn, C, NH, m, ctx);
                   }),
           0, fl);
    report("attention bwd (naive, B=8 T=1024 NH=12)" + mp,
           time_ms(ctx,
                   [&] {
                     attention_backward<T>(dqkv.data(), dout.data(), qkv.data(), saved.data(),
                                           AttentionKeys::causal(), scratch.data(), B, Tn, C, NH, m, ctx);
                   }),
           0, 2 * fl);
  }
}

// Flash attention (flash_attention.h) against the naive path, bf16, GPT-2 124M sizes, causal,
// on random inputs (zeros can time faster). TFLOP/s count the useful causal work for both:
// forward 4·B·NH·T²·HS/2 (two products over the lower triangle), backward 2.5× that (five
// products; the flash backward recomputes S and dP in its dQ pass, so it does seven).
void bench_flash_attention(Context& ctx) {
  const int B = 8, Tn = 1024, C = 768, NH = 12;
  const size_t BTC = static_cast<size_t>(B) * Tn * C;
  std::vector<Bf16> h(3 * BTC);
  for (size_t i = 0; i < h.size(); ++i) h[i] = f32_to_bf16(0.8f * normal01(42, 3, i));
  DeviceBuffer<Bf16> qkv(h, ctx), dout(std::vector<Bf16>(h.begin(), h.begin() + BTC), ctx), out(BTC),
      dqkv(3 * BTC);
  DeviceBuffer<float> lse(flash_attention_saved_bytes(B, Tn, NH) / sizeof(float)),
      dscratch(flash_attention_scratch_bytes(B, Tn, NH) / sizeof(float));
  DeviceBuffer<char> saved(attention_saved_bytes(B, Tn, C, NH, StorageType::BF16)),
      scratch(attention_scratch_bytes(B, Tn, C, NH, StorageType::BF16));
  const double fl = 4.0 * B * NH * static_cast<double>(Tn) * Tn * (C / NH) / 2.0;
  const ComputeType m = ComputeType::F32;
  report("attention fwd causal, naive (useful FLOPs)/bf16",
         time_ms(ctx,
                 [&] {
                   attention_forward<Bf16>(out.data(), saved.data(), qkv.data(), AttentionKeys::causal(),
                                           scratch.data(), B, Tn, C, NH, m, ctx);
                 }),
         0, fl);
  report("attention bwd causal, naive (useful FLOPs)/bf16",
         time_ms(ctx,
                 [&] {
                   attention_backward<Bf16>(dqkv.data(), dout.data(), qkv.data(), saved.data(),
                                            AttentionKeys::causal(), scratch.data(), B, Tn, C, NH, m, ctx);
                 }),
         0, 2.5 * fl);
  report("flash attention fwd causal (B=8 T=1024 NH=12)/bf16",
         time_ms(ctx,
                 [&] {
                   flash_attention_forward<Bf16>(out.data(), lse.data(), qkv.data(), AttentionKeys::causal(),
                                                 B, Tn, C, NH, ctx);
                 }),
         0, fl);
  report("flash attention bwd causal (B=8 T=1024 NH=12)/bf16",
         time_ms(ctx,
                 [&] {
                   flash_attention_backward<Bf16>(dqkv.data(), dout.data(), qkv.data(), out.data(),
                                                  lse.data(), AttentionKeys::causal(), dscratch.data(), B, Tn,
                                                  C, NH, ctx);
                 }),
         0, 2.5 * fl);
}

template <class T>
void bench_dtype(Context& ctx, const char* tn) {
  const int B = 8, Tn = 1024, C = 768, OC = 4 * C, V = 50257, Vp = 50304;
  const int N = B * Tn;
  const size_t NC = static_cast<size_t>(N) * C, NO = static_cast<size_t>(N) * OC;
  const double e = sizeof(T);
  DeviceBuffer<T> x(NC), y(NC), r(NC), w(C), bsum(C), h(NO), pre(NO), wfc(static_cast<size_t>(C) * OC),
      bfc(OC);
  DeviceBuffer<T> logits(static_cast<size_t>(N) * Vp), wte(static_cast<size_t>(Vp) * C),
      wpe(static_cast<size_t>(Tn) * C);
  DeviceBuffer<float> mean(N), rstd(N), losses(N), dloss(N),
      lnscratch(layernorm_backward_scratch_floats(N, C));
  for (auto* buf : {&x, &y, &r, &w, &bsum, &h, &pre, &wfc, &bfc, &logits, &wte, &wpe}) buf->zero(ctx);
  dloss.zero(ctx);
  std::vector<int> tok(N);
  for (int i = 0; i < N; ++i) tok[i] = (i * 7919) % V;
  DeviceBuffer<int> tokens(tok, ctx), targets(tok, ctx);
  const std::string p = std::string(" ") + tn;

  report("encoder_forward" + p,
         time_ms(ctx,
                 [&] {
                   embeddings_forward<T>(x.data(), tokens.data(), nullptr, wte.data(), wpe.data(), nullptr, B,
                                         Tn, C, ctx);
                 }),
         3.0 * NC * e, 0);
  const size_t sb = embeddings_backward_scratch_bytes(B, Tn);
  DeviceBuffer<char> escratch(sb);
  report("encoder_backward" + p,
         time_ms(ctx,
                 [&] {
                   embeddings_backward<T>(wte.data(), wpe.data(), nullptr, x.data(), tokens.data(), nullptr,
                                          -1, escratch.data(), sb, B, Tn, C, 0, ctx);
                 }),
         3.0 * NC * e, 0);
  report("layernorm_forward" + p,
         time_ms(ctx,
                 [&] {
                   layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), bsum.data(), N,
                                     C, 1e-5f, false, ctx);
                 }),
         2.0 * NC * e, 0);
  report("layernorm_backward" + p,
         time_ms(ctx,
                 [&] {
                   layernorm_backward(r.data(), w.data(), bsum.data(), y.data(), x.data(), w.data(),
                                      mean.data(), rstd.data(), lnscratch.data(), N, C, false, ctx);
                 }),
         4.0 * NC * e, 0);
  report("gelu_forward [N,4C]" + p, time_ms(ctx, [&] { gelu_forward(h.data(), pre.data(), NO, ctx); }),
         2.0 * NO * e, 0);
  report("crossentropy fwd+bwd [N,Vp]" + p,
         time_ms(ctx,
                 [&] {
                   crossentropy_forward_backward(losses.data(), logits.data(), logits.data(), targets.data(),
                                                 dloss.data(), N, V, Vp, ctx);
                 }),
         2.0 * N * Vp * e, 0);
  DeviceBuffer<int> sampled(N);
  report("crossentropy sampled labels fwd+bwd (Sophia)" + p,
         time_ms(ctx,
                 [&] {
                   crossentropy_sampled_forward_backward(losses.data(), logits.data(), sampled.data(),
                                                         logits.data(), dloss.data(), N, V, Vp, 1234, 0, ctx);
                 }),
         2.0 * N * Vp * e, 0);
  const double fl = 2.0 * N * C * OC;
  std::vector<ComputeType> modes = {ComputeType::F32};
  if (std::is_same_v<T, float>) modes.push_back(ComputeType::TF32);
  for (ComputeType m : modes) {
    const std::string mp = p + (std::is_same_v<T, float> ? std::string("/") + compute_name(m) : "");
    report("c_fc fwd, bias+GELU epilogue" + mp,
           time_ms(ctx,
                   [&] {
                     matmul_forward(h.data(), x.data(), wfc.data(), bfc.data(), N, C, OC, m, ctx, pre.data());
                   }),
           0, fl);
    report("c_fc fwd, unfused twin (bias epi + gelu)" + mp,
           time_ms(ctx,
                   [&] {
                     matmul_forward(pre.data(), x.data(), wfc.data(), bfc.data(), N, C, OC, m, ctx);
                     gelu_forward(h.data(), pre.data(), NO, ctx);
                   }),
           0, fl);
    report("c_fc backward (dinp, dweight, dbias)" + mp,
           time_ms(ctx,
                   [&] {
                     matmul_backward(x.data(), wfc.data(), bfc.data(), h.data(), x.data(), wfc.data(), N, C,
                                     OC, m, ctx);
                   }),
           0, 2 * fl);
  }
  bench_attention<T>(ctx, p, modes);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc > 1) g_iters = std::atoi(argv[1]);
    if (cuda_device_count() == 0) {
      std::printf("no CUDA GPU on this machine: nothing to time\n");
      return 0;
    }
    Context ctx(0);
    std::printf("device: %s (sm_%d%d, %d SMs); %d iterations per op\n", ctx.info().name.c_str(),
                ctx.info().major, ctx.info().minor, ctx.info().sm_count, g_iters);
    bench_dtype<float>(ctx, "fp32");
    bench_dtype<Bf16>(ctx, "bf16");
    bench_flash_attention(ctx);
    // AdamW over 124M fp32 parameters: reads p,g,m,v, writes p,m,v.
    const size_t n = 124439808;
    DeviceBuffer<float> p(n), g(n), m(n), v(n);
    for (auto* b : {&p, &g, &m, &v}) b->zero(ctx);
    DeviceBuffer<uint32_t> mask(decay_mask_bits(n, {}), ctx);
    cuda::AdamWArgs a;
    a.lr = 1e-4f;
    report(
        "adamw 124M params",
        time_ms(ctx, [&] { adamw_update(p.data(), g.data(), m.data(), v.data(), mask.data(), n, a, ctx); }),
        n * 7 * 4.0, 0);
    // Sophia-G over the same buffers (v as h): reads p,g,m,h, writes p,m; the Hessian EMA
    // reads h,g and writes h; the unclipped count reads m,h.
    cuda::SophiaArgs sa;
    sa.lr = 1e-4f;
    sa.rho_b = 0.05f * 480.0f;
    report(
        "sophia_update 124M params",
        time_ms(ctx, [&] { sophia_update(p.data(), g.data(), m.data(), v.data(), mask.data(), n, sa, ctx); }),
        n * 6 * 4.0, 0);
    report("sophia_hessian_update 124M",
           time_ms(ctx, [&] { sophia_hessian_update(v.data(), g.data(), n, 0.99f, ctx); }), n * 3 * 4.0, 0);
    DeviceBuffer<unsigned long long> unclipped(1);
    report(
        "sophia_unclipped_count 124M",
        time_ms(ctx, [&] { sophia_unclipped_count(unclipped.data(), m.data(), v.data(), n, sa.rho_b, ctx); }),
        n * 2 * 4.0, 0);
    DeviceBuffer<double> sum(1), scratch(sum_squares_scratch_doubles());
    report("sum_squares 124M",
           time_ms(ctx, [&] { cuda::sum_squares(sum.data(), g.data(), n, scratch.data(), ctx); }), n * 4.0,
           0);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
