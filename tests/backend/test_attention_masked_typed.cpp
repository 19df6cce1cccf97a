// The typed masked attention (attention_forward_typed / _backward_typed, the key-masked
// form of cpu/attention.cpp): with fp32 types and fp32 arithmetic it computes what the
// fp32 op does (same products, same softmax: within 1e-6); in bf16 it stays close to it (2e-2
// relative, bf16's 8-bit mantissa on qkv, P, y and dS); padded keys get probability exactly 0
// and their k and v no gradient; an all-padding sequence is one clear error.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/context.h"
#include "backend/ops/attention.h"
#include "backend/ops/convert.h"
#include "common/cpu_fp32.h"
#include "common/test_util.h"
#include "core/error.h"

namespace mptrain::cpu {
namespace {

struct Data {
  int B = 2, T = 37, C = 32, NH = 4;
  std::vector<float> qkv, dout;
  std::vector<int> mask;
};

Data make_data() {
  Data d;
  const size_t n = static_cast<size_t>(d.B) * d.T;
  uint64_t s = 99;
  auto next = [&]() {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>(static_cast<int64_t>(s >> 40) % 2001 - 1000) / 400.0f;
  };
  for (size_t i = 0; i < n * 3 * d.C; ++i) d.qkv.push_back(next());
  for (size_t i = 0; i < n * d.C; ++i) d.dout.push_back(next());
  for (int b = 0; b < d.B; ++b)
    for (int t = 0; t < d.T; ++t) d.mask.push_back(b == 0 ? 1 : (t < 25 && t != 3));  // padding and a hole
  return d;
}

struct Out {
  std::vector<float> y, p, dqkv;
};

// The typed op with every tensor in `t` and both products in `math`; results widened to fp32.
Out run_typed(const Data& d, StorageType t, ComputeType math) {
  Context ctx;
  GemmWorkspace ws(ctx);
  const AttentionTypes ty{t, t, t, ws.operand_storage(math), math, math};
  const size_t n = static_cast<size_t>(d.B) * d.T, eb = storage_bytes(t);
  const size_t tt = static_cast<size_t>(d.B) * d.NH * d.T * d.T;
  std::vector<char> qkv(n * 3 * d.C * eb), y(n * d.C * eb), dout(n * d.C * eb), dqkv(n * 3 * d.C * eb);
  std::vector<char> saved(attention_saved_bytes_typed(d.B, d.T, d.C, d.NH, ty));
  std::vector<float> scratch(attention_scratch_bytes_typed(d.B, d.T, d.C, d.NH, ty) / sizeof(float) + 1);
  convert(qkv.data(), t, d.qkv.data(), StorageType::F32, d.qkv.size());
  convert(dout.data(), t, d.dout.data(), StorageType::F32, d.dout.size());
  attention_forward_typed(y.data(), saved.data(), qkv.data(), scratch.data(), ty, d.B, d.T, d.C, d.NH, ws,
                          ctx, false, d.mask.data());
  attention_backward_typed(dqkv.data(), dout.data(), qkv.data(), saved.data(), scratch.data(), ty, d.B, d.T,
                           d.C, d.NH, ws, ctx, false);
  Out o{std::vector<float>(n * d.C), std::vector<float>(tt), std::vector<float>(n * 3 * d.C)};
  convert(o.y.data(), StorageType::F32, y.data(), t, o.y.size());
  convert(o.p.data(), StorageType::F32, saved.data(), t, o.p.size());
  convert(o.dqkv.data(), StorageType::F32, dqkv.data(), t, o.dqkv.size());
  return o;
}

Out run_fp32(const Data& d) {
  Context ctx;
  const size_t n = static_cast<size_t>(d.B) * d.T;
  Out o{std::vector<float>(n * d.C), std::vector<float>(attention_saved_floats(d.B, d.T, d.C, d.NH)),
        std::vector<float>(n * 3 * d.C)};
  std::vector<float> scratch(attention_scratch_floats(d.B, d.T, d.C, d.NH));
  attention_masked_forward(o.y.data(), o.p.data(), d.qkv.data(), d.mask.data(), scratch.data(), d.B, d.T, d.C, d.NH,
                           ctx);
  attention_masked_backward(o.dqkv.data(), d.dout.data(), d.qkv.data(), o.p.data(), scratch.data(), d.B, d.T, d.C,
                            d.NH, ctx);
  return o;
}

TEST(AttentionMaskedTyped, Fp32TypesMatchTheFp32OpAndBf16StaysClose) {
  const Data d = make_data();
  const Out ref = run_fp32(d);
  const Out f = run_typed(d, StorageType::F32, ComputeType::F32);
  EXPECT_LT(testing::relative_error(f.y.data(), ref.y.data(), ref.y.size()), 1e-6);
  EXPECT_LT(testing::relative_error(f.p.data(), ref.p.data(), ref.p.size()), 1e-6);
  EXPECT_LT(testing::relative_error(f.dqkv.data(), ref.dqkv.data(), ref.dqkv.size()), 1e-6);
  const Out h = run_typed(d, StorageType::BF16, ComputeType::BF16);
  EXPECT_LT(testing::relative_error(h.y.data(), ref.y.data(), ref.y.size()), 2e-2);
  EXPECT_LT(testing::relative_error(h.p.data(), ref.p.data(), ref.p.size()), 2e-2);
  EXPECT_LT(testing::relative_error(h.dqkv.data(), ref.dqkv.data(), ref.dqkv.size()), 2e-2);
  // Padded keys: probability exactly 0 for every query, and no gradient into their k and v.
  for (const Out* o : {&f, &h})
    for (int b = 0; b < d.B; ++b)
      for (int j = 0; j < d.T; ++j) {
        if (d.mask[b * d.T + j]) continue;
        for (int hh = 0; hh < d.NH; ++hh)
          for (int t = 0; t < d.T; ++t)
            ASSERT_EQ(o->p[((static_cast<size_t>(b) * d.NH + hh) * d.T + t) * d.T + j], 0.0f) << b << " " << j;
        const float* g = o->dqkv.data() + (static_cast<size_t>(b) * d.T + j) * 3 * d.C;
        for (int c = d.C; c < 3 * d.C; ++c) ASSERT_EQ(g[c], 0.0f) << "padded key " << j << " column " << c;
      }
}

TEST(AttentionMaskedTyped, AllPaddingSequenceIsAClearError) {
  Data d = make_data();
  for (int t = 0; t < d.T; ++t) d.mask[d.T + t] = 0;
  try {
    run_typed(d, StorageType::BF16, ComputeType::BF16);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sequence 1 of the batch is all padding"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mptrain::cpu
