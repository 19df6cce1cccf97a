// encoder_forward / encoder_backward (token + position embeddings) against float64 references,
// with repeated tokens (the scatter's collision case) and pre-filled gradients (+=).
#include <gtest/gtest.h>

#include <string>

#include "common/cpu_fp32.h"
#include "op_test_util.h"

namespace mptrain::cpu {
namespace {

using test::all_close;
using test::Guarded;
using test::Tol;

struct EncoderCase {
  int B, T, C, V;
  Tol tol;
};
// V small so that tokens repeat within and across sequences.
const EncoderCase kCases[] = {{1, 1, 31, 3, {0, 0}},         {2, 7, 32, 5, {0, 0}},
                              {3, 64, 33, 11, {1e-6, 1e-6}}, {2, 17, 127, 4, {1e-6, 1e-6}},
                              {1, 9, 129, 2, {1e-6, 1e-6}},  {4, 5, 260, 7, {1e-6, 1e-6}}};

std::vector<int> make_tokens(int n, int V, uint64_t seed) {
  std::vector<int> t(n);
  for (int i = 0; i < n; ++i) t[i] = static_cast<int>(uniform01(seed, 5, i) * V) % V;
  return t;
}

TEST(Encoder, Forward) {
  uint64_t seed = 10;
  for (const EncoderCase& ec : kCases) {
    const int B = ec.B, T = ec.T, C = ec.C;
    auto tokens = make_tokens(B * T, ec.V, ++seed);
    auto wte = test::randn(static_cast<size_t>(ec.V) * C, ++seed);
    auto wpe = test::randn(static_cast<size_t>(T) * C, ++seed);
    Guarded out(static_cast<size_t>(B) * T * C);
    encoder_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
    std::vector<double> ref(out.size());
    for (int bt = 0; bt < B * T; ++bt)
      for (int c = 0; c < C; ++c)
        ref[static_cast<size_t>(bt) * C + c] =
            static_cast<double>(wte[static_cast<size_t>(tokens[bt]) * C + c]) +
            wpe[static_cast<size_t>(bt % T) * C + c];
    // One float addition, as in the reference rounded once: exact up to the final rounding.
    const std::string what =
        "encoder_forward B=" + std::to_string(B) + " T=" + std::to_string(T) + " C=" + std::to_string(C);
    EXPECT_TRUE(all_close(out.values(), ref, {0.0, 6e-8}, what));
    EXPECT_TRUE(out.guards_intact()) << what;
  }
}

TEST(Encoder, BackwardAccumulates) {
  uint64_t seed = 20;
  for (const EncoderCase& ec : kCases) {
    const int B = ec.B, T = ec.T, C = ec.C;
    auto tokens = make_tokens(B * T, ec.V, ++seed);
    auto dout = test::randn(static_cast<size_t>(B) * T * C, ++seed);
    auto dwte0 = test::randn(static_cast<size_t>(ec.V) * C, ++seed);
    auto dwpe0 = test::randn(static_cast<size_t>(T) * C, ++seed);
    Guarded dwte(dwte0), dwpe(dwpe0);
    encoder_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, C);
    auto rwte = test::to_double(dwte0), rwpe = test::to_double(dwpe0);
    for (int bt = 0; bt < B * T; ++bt)
      for (int c = 0; c < C; ++c) {
        const double g = dout[static_cast<size_t>(bt) * C + c];
        rwte[static_cast<size_t>(tokens[bt]) * C + c] += g;
        rwpe[static_cast<size_t>(bt % T) * C + c] += g;
      }
    const std::string what =
        " B=" + std::to_string(B) + " T=" + std::to_string(T) + " C=" + std::to_string(C);
    // Sums of up to B·T float additions: tolerance grows with the count.
    const Tol tol{1e-6 * B * T, 1e-6};
    EXPECT_TRUE(all_close(dwte.values(), rwte, tol, "dwte" + what));
    EXPECT_TRUE(all_close(dwpe.values(), rwpe, tol, "dwpe" + what));
    EXPECT_TRUE(dwte.guards_intact() && dwpe.guards_intact()) << what;
  }
}

TEST(Encoder, BackwardIsThreadCountIndependent) {
  const int B = 4, T = 33, C = 200, V = 3;
  auto tokens = make_tokens(B * T, V, 1);
  auto dout = test::randn(static_cast<size_t>(B) * T * C, 2);
  std::vector<float> wte[2], wpe[2];
  for (int threads : {1, 2}) {
    test::ScopedThreads scope(threads);
    wte[threads - 1].assign(static_cast<size_t>(V) * C, 0.0f);
    wpe[threads - 1].assign(static_cast<size_t>(T) * C, 0.0f);
    encoder_backward(wte[threads - 1].data(), wpe[threads - 1].data(), dout.data(), tokens.data(), B, T, C);
  }
  EXPECT_TRUE(test::bit_identical(wte[0], wte[1], "dwte with 1 and 2 threads"));
  EXPECT_TRUE(test::bit_identical(wpe[0], wpe[1], "dwpe with 1 and 2 threads"));
}

}  // namespace
}  // namespace mptrain::cpu
