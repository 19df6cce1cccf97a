// BERT's GPU kernels, each against its CPU op or a host loop, every storage type, outputs
// poisoned first and += outputs pre-filled with random values: exact GELU and tanh (forward and
// backward), the embeddings with token types (the [PAD] word row takes no gradient), row
// gather / scatter-add / arg-max. (The nn.Linear layout is the CUDA backend's linear, checked in
// test_backend_conformance_gpu.cpp.) Tolerances: fp32 1e-5, bf16/fp16 1e-2.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/activations.h"
#include "backend/cuda/embeddings.h"
#include "backend/cuda/rows.h"
#include "backend/ops/embeddings.h"
#include "common/cpu_fp32.h"
#include "backend/device.h"
#include "core/buffer.h"
#include "cuda/gpu_test_util.h"

namespace mptrain {
namespace {

using namespace gputest;

const size_t kSizes[] = {1, 31, 32, 33, 129, 260, 4099};

template <class T>
class CudaBertOps : public ::testing::Test {};
TYPED_TEST_SUITE(CudaBertOps, StorageTypes);

cuda::DeviceBuffer<int> upload_ints(const std::vector<int>& v) { return cuda::DeviceBuffer<int>(v, ctx()); }

TYPED_TEST(CudaBertOps, GeluErfAndTanhMatchCpu) {
  SKIP_WITHOUT_GPU();
  using T = TypeParam;
  for (size_t n : kSizes) {
    SCOPED_TRACE("n=" + std::to_string(n) + " " + type_name<T>());
    const std::vector<float> x = rounded<T>(randn(n, 11, 3.0f)), dy = rounded<T>(randn(n, 12));
    auto dx = upload<T>(x), ddy = upload<T>(dy);
    auto g = poisoned<T>(n), dg = poisoned<T>(n), th = poisoned<T>(n), dth = poisoned<T>(n);
    cuda::gelu_erf_forward(g.data(), dx.data(), n, ctx());
    cuda::gelu_erf_backward(dg.data(), dx.data(), ddy.data(), n, ctx());
    cuda::tanh_forward(th.data(), dx.data(), n, ctx());
    // tanh's backward reads the forward's output: give it the CPU's, rounded to T as stored.
    std::vector<float> g_ref(n), dg_ref(n), th_ref(n), dth_ref(n);
    cpu::gelu_erf_forward(g_ref.data(), x.data(), n);
    cpu::gelu_erf_backward(dg_ref.data(), x.data(), dy.data(), n);
    cpu::tanh_forward(th_ref.data(), x.data(), n);
    const std::vector<float> th_stored = rounded<T>(th_ref);
    auto dth_out = upload<T>(th_stored);
    cuda::tanh_backward(dth.data(), dth_out.data(), ddy.data(), n, ctx());
    cpu::tanh_backward(dth_ref.data(), th_stored.data(), dy.data(), n);
    EXPECT_LT(rel_err(download(g), g_ref), tolerance<T>()) << "gelu_erf forward";
    EXPECT_LT(rel_err(download(dg), dg_ref), tolerance<T>()) << "gelu_erf backward";
    EXPECT_LT(rel_err(download(th), th_ref), tolerance<T>()) << "tanh forward";
    EXPECT_LT(rel_err(download(dth), dth_ref), tolerance<T>()) << "tanh backward";
  }
}

TYPED_TEST(CudaBertOps, InPlaceActivationsEqualOutOfPlace) {
  SKIP_WITHOUT_GPU();
  using T = TypeParam;
  const size_t n = 260;
  const std::vector<float> x = rounded<T>(randn(n, 13, 2.0f)), dy = rounded<T>(randn(n, 14));
  auto dx = upload<T>(x), d = upload<T>(dy), sep = poisoned<T>(n), t_in = upload<T>(x),
       t_sep = poisoned<T>(n);
  cuda::gelu_erf_backward(sep.data(), dx.data(), d.data(), n, ctx());
  cuda::gelu_erf_backward(d.data(), dx.data(), d.data(), n, ctx());  // dinp aliases dout
  EXPECT_EQ(rel_err(download(d), download(sep)), 0.0);
  cuda::tanh_forward(t_sep.data(), t_in.data(), n, ctx());
  cuda::tanh_forward(t_in.data(), t_in.data(), n, ctx());  // out aliases inp (the pooler)
  EXPECT_EQ(rel_err(download(t_in), download(t_sep)), 0.0);
}

// B·T positions with repeated tokens, the [PAD] id (0) at the end of two sequences, both types.
TYPED_TEST(CudaBertOps, EmbeddingsMatchCpuAndSkipThePadRow) {
  SKIP_WITHOUT_GPU();
  using T = TypeParam;
  const int B = 3, Tn = 33, C = 72, V = 50, TV = 2, P = 40, pad = 0;
  const int N = B * Tn;
  std::vector<int> tokens(N), types(N);
  for (int i = 0; i < N; ++i) {
    const int b = i / Tn, t = i % Tn;
    tokens[i] = (b < 2 && t >= 28) ? pad : 1 + (7 * i + 3) % (V - 1);
    types[i] = t >= 15 ? 1 : 0;
  }
  tokens[5] = tokens[40] = tokens[80] = 9;  // a token in three sequences
  const std::vector<float> word = rounded<T>(randn(static_cast<size_t>(V) * C, 21)),
                           pos = rounded<T>(randn(static_cast<size_t>(P) * C, 22)),
                           type = rounded<T>(randn(static_cast<size_t>(TV) * C, 23)),
                           dout = rounded<T>(randn(static_cast<size_t>(N) * C, 24));
  auto dtok = upload_ints(tokens), dtypes = upload_ints(types);
  auto dword = upload<T>(word), dpos = upload<T>(pos), dtype = upload<T>(type), ddout = upload<T>(dout);
  auto out = poisoned<T>(static_cast<size_t>(N) * C);
  cuda::embeddings_forward(out.data(), dtok.data(), dtypes.data(), dword.data(), dpos.data(), dtype.data(), B,
                           Tn, C, ctx());
  std::vector<float> ref(static_cast<size_t>(N) * C);
  cpu::embeddings_forward(ref.data(), tokens.data(), types.data(), word.data(), pos.data(), type.data(), B,
                          Tn, C);
  EXPECT_LT(rel_err(download(out), ref), tolerance<T>()) << "embeddings forward";

  // Backward accumulates into random gradients (the weights reused as the starting values).
  const size_t scratch_bytes = cuda::embeddings_backward_scratch_bytes(B, Tn);
  cuda::DeviceBuffer<char> scratch(scratch_bytes);
  cuda::embeddings_backward(dword.data(), dpos.data(), dtype.data(), ddout.data(), dtok.data(), dtypes.data(),
                            pad, scratch.data(), scratch_bytes, B, Tn, C, TV, ctx());
  std::vector<float> gw = word, gp = pos, gt = type;
  cpu::embeddings_backward(gw.data(), gp.data(), gt.data(), dout.data(), tokens.data(), types.data(), pad, B,
                           Tn, C);
  const std::vector<float> got_w = download(dword);
  EXPECT_LT(rel_err(got_w, gw), tolerance<T>()) << "dword";
  EXPECT_LT(rel_err(download(dpos), gp), tolerance<T>()) << "dpos";
  EXPECT_LT(rel_err(download(dtype), gt), tolerance<T>()) << "dtype (token types)";
  for (int c = 0; c < C; ++c)
    ASSERT_EQ(got_w[static_cast<size_t>(pad) * C + c], word[static_cast<size_t>(pad) * C + c])
        << "the [PAD] row took gradient at channel " << c;
}

TYPED_TEST(CudaBertOps, GatherScatterAndArgmaxMatchHostLoops) {
  SKIP_WITHOUT_GPU();
  using T = TypeParam;
  const int rows_in = 97, C = 33, R = 5, R_out = 64;
  const std::vector<int> idx = {96, 0, 31, 32, 64};  // distinct
  const std::vector<float> in = rounded<T>(randn(static_cast<size_t>(rows_in) * C, 31));
  auto din = upload<T>(in), didx = upload_ints(idx), g = poisoned<T>(static_cast<size_t>(R_out) * C);
  cuda::gather_rows(g.data(), din.data(), didx.data(), R, R_out, rows_in, C, ctx());
  std::vector<float> want(static_cast<size_t>(R_out) * C, 0.0f);
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c)
      want[static_cast<size_t>(r) * C + c] = in[static_cast<size_t>(idx[r]) * C + c];
  EXPECT_EQ(rel_err(download(g), want), 0.0) << "gather_rows (padding rows must be 0)";

  const std::vector<float> src = rounded<T>(randn(static_cast<size_t>(R) * C, 32));
  auto dsrc = upload<T>(src);
  cuda::scatter_add_rows(din.data(), dsrc.data(), didx.data(), R, rows_in, C, ctx());
  std::vector<float> sum = in;
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c)
      sum[static_cast<size_t>(idx[r]) * C + c] += src[static_cast<size_t>(r) * C + c];
  EXPECT_LT(rel_err(download(din), sum), tolerance<T>()) << "scatter_add_rows";

  // Arg-max over the first V of `stride` columns: padding columns hold the largest values (must
  // be ignored), each row's maximum appears twice (the first must win), and V = 2 (NSP).
  for (const auto& [V, stride] : {std::pair{300, 320}, std::pair{2, 2}, std::pair{33, 40}}) {
    SCOPED_TRACE("V=" + std::to_string(V) + " stride=" + std::to_string(stride));
    const int rows = 37;
    std::vector<float> x = rounded<T>(randn(static_cast<size_t>(rows) * stride, 33 + V));
    std::vector<int> expect(rows);
    for (int r = 0; r < rows; ++r) {
      float* row = x.data() + static_cast<size_t>(r) * stride;
      for (int j = V; j < stride; ++j) row[j] = 100.0f;
      const int first = (5 * r) % V, second = (first + 1 + r % 3) % V;
      row[first] = row[second] = 8.0f;
      expect[r] = std::min(first, second);
    }
    auto dx = upload<T>(x);
    cuda::DeviceBuffer<int> best(rows);
    best.poison(ctx());
    cuda::row_argmax(best.data(), dx.data(), rows, V, stride, ctx());
    EXPECT_EQ(best.download(ctx()), expect);
  }
}

TEST(CudaBertOpsArgs, BadSizesAreOneClearError) {
  SKIP_WITHOUT_GPU();
  cuda::DeviceBuffer<float> a(64), b(64);
  cuda::DeviceBuffer<int> idx(4);
  expect_error_contains([&] { cuda::gather_rows(a.data(), b.data(), idx.data(), 5, 4, 8, 8, ctx()); },
                        "[gather_rows]");
  expect_error_contains([&] { cuda::row_argmax(idx.data(), a.data(), 4, 9, 8, ctx()); }, "[row_argmax]");
}

// Bad input that only the device sees (an index list, packed offsets in device memory) makes no
// out-of-bounds access and is one clear error at the backend's next wait for the device.
TEST(CudaBertOpsArgs, BadIndicesAndPackingInDeviceMemoryAreOneClearErrorAtTheNextSync) {
  SKIP_WITHOUT_GPU();
  const std::unique_ptr<Backend> be = make_cuda_backend(0);
  const int C = 8;
  FloatBuffer big(16 * C, be->memory()), small(2 * C, be->memory());
  IndexBuffer rows(2, be->memory());
  const std::vector<int> bad = {3, 16};  // 16: one past the last row
  rows.upload(bad.data(), bad.size());
  be->gather_rows(View::f32(small.data(), {2, C}), View::f32(big.data(), {16, C}), View::ints(rows.data(), 2));
  std::vector<float> host(2 * C);
  expect_error_contains([&] { be->download(host.data(), View::f32(small.data(), {2, C})); },
                        "[backend cuda] a kernel found bad input in device memory: a row index");
  be->download(host.data(), View::f32(small.data(), {2, C}));  // reported once, then cleared
  EXPECT_EQ(host[C], 0.0f) << "the bad index's row is left 0";

  const int B = 2, T = 4, V = 10;
  FloatBuffer word(V * C, be->memory()), pos(T * C, be->memory()), type(2 * C, be->memory()),
      out(6 * C, be->memory());
  IndexBuffer tokens(6, be->memory()), types(6, be->memory()), cu(3, be->memory());
  const std::vector<int> ids = {1, 2, 3, 4, 5, 6}, cu_short = {0, 3, 5};  // ends at 5 of 6 rows
  tokens.upload(ids.data(), ids.size());
  cu.upload(cu_short.data(), cu_short.size());
  EmbeddingArgs a;
  a.out = View::f32(out.data(), {6, C});
  a.tokens = View::ints(tokens.data(), 6);
  a.B = B;
  a.T = T;
  a.cu_seqlens = View::ints(cu.data(), 3);
  a.word = View::f32(word.data(), {V, C});
  a.pos = View::f32(pos.data(), {T, C});
  a.types = View::ints(types.data(), 6);
  a.type_table = View::f32(type.data(), {2, C});
  be->embedding(a);
  std::vector<float> o(6 * C);
  expect_error_contains([&] { be->download(o.data(), a.out); }, "packed sequences whose cu_seqlens");
}

}  // namespace
}  // namespace mptrain
