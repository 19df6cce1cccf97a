// Issue 41's first question, asked of oneDNN directly: how much of a bf16 GEMM's time on an AMX
// CPU is the weights' packing? The same matmul (bf16 operands, fp32 result, as the CPU backend's
// forward X·W runs it) with the weights in plain row-major layout (what context.cpp hands oneDNN
// today: it packs them on every call) and with the weights reordered once into the layout the
// primitive asks for (format_tag::any, then a reorder outside the timed loop: what prepacked
// weight copies refreshed once per step would give). Google Benchmark; run:
//   OMP_NUM_THREADS=2 build/bench_gemm_prepacked --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <dnnl.hpp>
#include <vector>

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

void BM_Matmul(benchmark::State& state) {
  const dnnl::memory::dim M = state.range(0), N = state.range(1), K = state.range(2);
  const int variant = static_cast<int>(state.range(3));
  const bool prepacked = variant == 1 || variant == 4;
  const bool misaligned = variant == 2;  // plain weights, operands 2 bytes off 64-byte alignment
  // 3, 4: the weights read transposed, as a linear's backward reads them for dx = dy·W^T (the
  // K×N operand is a view of an N×K row-major matrix), plain or reordered once.
  const bool transposed = variant == 3 || variant == 4;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  const dnnl::memory::desc a_md({M, K}, dt::bf16, tag::ab), c_md({M, N}, dt::f32, tag::ab),
      b_plain = transposed ? dnnl::memory::desc({K, N}, dt::bf16, tag::ba)
                           : dnnl::memory::desc({K, N}, dt::bf16, tag::ab),
      b_any({K, N}, dt::bf16, tag::any);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, prepacked ? b_any : b_plain, c_md), eng);
  dnnl::memory a(a_md, eng), b(b_plain, eng), c(c_md, eng);
  auto* pa = static_cast<std::uint16_t*>(a.get_data_handle());
  auto* pb = static_cast<std::uint16_t*>(b.get_data_handle());
  for (dnnl::memory::dim i = 0; i < M * K; ++i)
    pa[i] = static_cast<std::uint16_t>(0x3f80 + (i % 64));  // ~1..1.5
  for (dnnl::memory::dim i = 0; i < K * N; ++i)
    pb[i] = static_cast<std::uint16_t>(0x3c00 + (i % 64));  // ~0.008
  std::vector<std::uint16_t> a_off, b_off;
  if (misaligned) {  // the same values at addresses 2 bytes past an aligned one
    a_off.assign(pa, pa + M * K);
    b_off.assign(pb, pb + K * N);
    a_off.insert(a_off.begin(), 0);
    b_off.insert(b_off.begin(), 0);
    a.set_data_handle(a_off.data() + 1);
    b.set_data_handle(b_off.data() + 1);
  }
  dnnl::memory w = b;
  if (prepacked && pd.weights_desc() != b_plain) {
    w = dnnl::memory(pd.weights_desc(), eng);
    dnnl::reorder(b, w).execute(s, b, w);  // once, outside the timed loop
  }
  const dnnl::matmul mm(pd);
  for (auto _ : state) {
    mm.execute(s, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, c}});
    s.wait();
  }
  state.SetLabel(std::string(pd.impl_info_str()) + (transposed ? " transposed," : "") +
                 (prepacked    ? " prepacked"
                  : misaligned ? " plain, misaligned"
                               : " plain"));
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * M * N * K * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// GPT-2 124M's forward GEMMs at B·T = 1024 (c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj): plain
// weights, prepacked weights, and plain weights with both operands off 64-byte alignment; then
// the backward's dx GEMMs (the same weights read transposed: K and N swapped), plain and
// prepacked.
void Shapes(benchmark::internal::Benchmark* b) {
  for (const auto& [k, n] : {std::pair{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}})
    for (const int variant : {0, 1, 2}) b->Args({1024, n, k, variant});
  for (const auto& [n, k] : {std::pair{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}})
    for (const int variant : {3, 4}) b->Args({1024, n, k, variant});
  b->ArgNames({"M", "N", "K", "variant"})->Unit(benchmark::kMillisecond)->UseRealTime();
}
BENCHMARK(BM_Matmul)->Apply(Shapes);

}  // namespace

BENCHMARK_MAIN();
