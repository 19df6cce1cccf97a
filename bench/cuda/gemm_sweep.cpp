// What cuBLASLt's heuristic leaves on the table in GPT-2 124M's bf16 step on this GPU: every
// product the CUDA backend issues for one layer and the LM head (B·T rows, C = 768, Vp = 50304),
// with the arguments cuda_backend.cpp gives gemm() for the Conv1D weights [in, out], and the same
// products with nn.Linear's [out, in] weights (PyTorch's layout, which a weight copy could take at
// no cost). For each: the heuristic's first algorithm (the one gemm() plans), the fastest of its
// first `algos`, and the step's total of each (12 layers, one head).
// Built only with the CUDA backend (target bench_cuda_gemm); run on a GPU machine:
//   build/bench_cuda_gemm [rows=16384] [algos=16] [iters=10]
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/context.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/gemm.h"
#include "core/error.h"
#include "core/rng.h"

using namespace mptrain;
using namespace mptrain::cuda;

namespace {

constexpr int kC = 768, kVp = 50304, kLayers = 12;
constexpr StorageType kBf16 = StorageType::BF16;

// Device memory of `bytes`, filled with bf16 values in [-1, 1) (a 64 MiB random block, repeated):
// tensor cores take longer on random bits than on zeros.
DeviceMemory random_bf16(size_t bytes) {
  DeviceMemory m(bytes);
  constexpr size_t kBlock = size_t{64} << 20;
  std::vector<uint16_t> host(kBlock / 2);
  Rng rng{1234};
  for (uint16_t& h : host) {
    const float f = 2.0f * rng.uniform() - 1.0f;
    uint32_t u;
    std::memcpy(&u, &f, 4);
    h = static_cast<uint16_t>(u >> 16);
  }
  for (size_t off = 0; off < bytes; off += kBlock)
    MPT_CUDA_CHECK(cudaMemcpy(static_cast<char*>(m.get()) + off, host.data(), std::min(kBlock, bytes - off),
                              cudaMemcpyHostToDevice));
  return m;
}

struct Product {
  std::string name;
  int count;  // per step
  int M, N, K;
  bool trans_a, trans_b, accumulate;
  LtEpilogue epilogue;
};

struct Best {
  double first = 0, best = 0;
};

// Times one product's algorithms; prints a line; returns (first, best) ms.
Best sweep(const Product& p, void* c, const void* a, const void* b, void* bias, void* aux, int algos, int iters,
           Context& ctx) {
  GemmEpilogue ep{p.epilogue, nullptr, nullptr, nullptr};
  if (p.epilogue == LtEpilogue::Bias || p.epilogue == LtEpilogue::GeluBias) ep.bias = bias;
  if (p.epilogue == LtEpilogue::GeluBias || p.epilogue == LtEpilogue::DGelu) ep.aux = aux;
  const auto t = gemm_sweep(c, kBf16, a, b, kBf16, p.M, p.N, p.K, p.trans_a, p.trans_b, p.accumulate,
                            ComputeType::BF16, ep, algos, iters, ctx);
  size_t best = 0;
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i].ms > 0 && (t[best].ms <= 0 || t[i].ms < t[best].ms)) best = i;
  const double flops = 2.0 * p.M * p.N * p.K;
  const auto tflops = [&](float ms) { return ms > 0 ? flops / ms / 1e9 : 0.0; };
  std::printf("%-34s %6d %6d %6d %c%c %-9s  first %7.3f ms %6.1f TF/s  best #%-2d %7.3f ms %6.1f TF/s "
              "(algo %d tile %d splitK %d red %d waves %.2f)  %zu algos\n",
              p.name.c_str(), p.M, p.N, p.K, p.trans_a ? 'T' : 'N', p.trans_b ? 'T' : 'N',
              epilogue_name(p.epilogue), t[0].ms, tflops(t[0].ms), t[best].rank, t[best].ms, tflops(t[best].ms),
              t[best].algo_id, t[best].tile, t[best].splitk, t[best].reduction, t[best].waves, t.size());
  std::fflush(stdout);
  return {t[0].ms * p.count, t[best].ms * p.count};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int R = argc > 1 ? std::atoi(argv[1]) : 16384;
    const int algos = argc > 2 ? std::atoi(argv[2]) : 16;
    const int iters = argc > 3 ? std::atoi(argv[3]) : 10;
    MPT_CHECK(R > 0 && R % 8 == 0 && algos > 0 && iters > 0, "usage: bench_cuda_gemm [rows] [algos] [iters]");
    Context ctx(0);
    const DeviceInfo& d = ctx.info();
    std::printf("GPT-2 124M's GEMMs, bf16, %d rows, on %s (%d SMs), cuBLASLt %zu; the heuristic's first %d "
                "algorithms, %d launches each\n",
                R, d.name.c_str(), d.sm_count, cublasLtGetVersion(), algos, iters);
    const size_t big = static_cast<size_t>(R) * kVp * 2;  // logits / dlogits
    DeviceMemory g = random_bf16(big), x = random_bf16(static_cast<size_t>(R) * 4 * kC * 2),
                 aux = random_bf16(static_cast<size_t>(R) * 4 * kC * 2),
                 out = random_bf16(big), w = random_bf16(static_cast<size_t>(kVp) * kC * 2),
                 bias = random_bf16(static_cast<size_t>(kVp) * 2);
    // The layer's linears (in → out features) and the LM head (wte [Vp, C], read transposed).
    struct Linear {
      const char* name;
      int in, out;
      LtEpilogue fwd;
    };
    const Linear layer[] = {{"qkv", kC, 3 * kC, LtEpilogue::Bias},
                            {"attn.proj", kC, kC, LtEpilogue::Bias},
                            {"fc", kC, 4 * kC, LtEpilogue::GeluBias},
                            {"fc.proj", 4 * kC, kC, LtEpilogue::Bias}};
    Best ours, linear;  // Conv1D weights (as the backend runs them), nn.Linear weights
    const auto add = [](Best& to, const Best& b) {
      to.first += b.first;
      to.best += b.best;
    };
    for (const bool conv1d : {true, false}) {
      std::printf("--- weights %s\n", conv1d ? "[in, out] (Conv1D: the backend's)" : "[out, in] (nn.Linear)");
      Best& sum = conv1d ? ours : linear;
      for (const Linear& l : layer) {
        const std::string n = l.name;
        // forward: out[R, o] = x[R, i]·W; dx[R, i] = g[R, o]·Wᵀ; dW (+=) xᵀ·g (Conv1D) or gᵀ·x.
        add(sum, sweep({n + " forward", kLayers, R, l.out, l.in, false, !conv1d, false, l.fwd}, out.get(),
                       x.get(), w.get(), bias.get(), aux.get(), algos, iters, ctx));
        add(sum, sweep({n + " dx", kLayers, R, l.in, l.out, false, conv1d, false, LtEpilogue::None}, out.get(),
                       g.get(), w.get(), nullptr, nullptr, algos, iters, ctx));
        if (n == "fc.proj")  // GELU's derivative in the product (x_epilogue): what the epilogue costs
          sweep({n + " dx (dgelu epilogue)", kLayers, R, l.in, l.out, false, conv1d, false, LtEpilogue::DGelu},
                out.get(), g.get(), w.get(), nullptr, aux.get(), algos, iters, ctx);
        if (conv1d)
          add(sum, sweep({n + " dW", kLayers, l.in, l.out, R, true, false, true, LtEpilogue::None}, out.get(),
                         x.get(), g.get(), nullptr, nullptr, algos, iters, ctx));
        else
          add(sum, sweep({n + " dW", kLayers, l.out, l.in, R, true, false, true, LtEpilogue::None}, out.get(),
                         g.get(), x.get(), nullptr, nullptr, algos, iters, ctx));
      }
      // The tied head in both: logits = x·wteᵀ, dx = dlogits·wte, dwte (+=) dlogitsᵀ·x.
      add(sum, sweep({"lm_head forward", 1, R, kVp, kC, false, true, false, LtEpilogue::None}, out.get(),
                     x.get(), w.get(), nullptr, nullptr, algos, iters, ctx));
      add(sum, sweep({"lm_head dx", 1, R, kC, kVp, false, false, false, LtEpilogue::None}, out.get(), g.get(),
                     w.get(), nullptr, nullptr, algos, iters, ctx));
      add(sum, sweep({"lm_head dW", 1, kVp, kC, R, true, false, true, LtEpilogue::None}, out.get(), g.get(),
                     x.get(), nullptr, nullptr, algos, iters, ctx));
    }
    std::printf("a step's GEMMs (12 layers + head): Conv1D weights, first algorithm %.2f ms, fastest %.2f ms; "
                "nn.Linear weights, first %.2f ms, fastest %.2f ms\n",
                ours.first, ours.best, linear.first, linear.best);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda_gemm: %s\n", e.what());
    return 1;
  }
}
