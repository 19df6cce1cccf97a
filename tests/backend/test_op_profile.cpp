// The op profile (backend/op_profile.h): each op the CPU backend runs lands in its row once per
// call, with its products' FLOPs and the bytes of its tensors; nothing is recorded when the
// profile is off or while a graph is being captured.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/cpu/context.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/op_profile.h"

namespace mptrain {
namespace {

const OpProfileRow* find_row(const std::vector<OpProfileRow>& rows, const std::string& label) {
  for (const OpProfileRow& r : rows)
    if (r.label == label) return &r;
  return nullptr;
}

struct Linear {
  int N = 8, K = 16, M = 4;
  std::vector<float> x = std::vector<float>(static_cast<size_t>(N) * K, 0.5f);
  std::vector<float> w = std::vector<float>(static_cast<size_t>(K) * M, 0.25f);
  std::vector<float> b = std::vector<float>(static_cast<size_t>(M), 1.0f);
  std::vector<float> out = std::vector<float>(static_cast<size_t>(N) * M, 0.0f);
  LinearArgs args() {
    LinearArgs a;
    a.out = View::f32(out.data(), {N, M});
    a.x = View::f32(x.data(), {N, K});
    a.w = View::f32(w.data(), {K, M});
    a.bias = View::f32(b.data(), {M});
    return a;
  }
};

// A CPU backend timing into `profile` from the start.
class ProfiledCpuBackend : public ::testing::Test {
 protected:
  void SetUp() override { be.set_profile(&profile); }
  cpu::Context ctx;
  cpu::CpuBackend be{ctx};
  OpProfile profile;
};

TEST_F(ProfiledCpuBackend, EachCallLandsInItsShapesRowWithItsFlopsAndBytes) {
  Linear lin;
  be.linear(lin.args());
  be.linear(lin.args());
  std::vector<float> v(100, 1.0f);
  const double sum = be.sum_squares(View::f32(v.data(), {100}));
  be.set_profile(nullptr);
  be.linear(lin.args());  // not profiled
  EXPECT_EQ(sum, 100.0);
  EXPECT_FLOAT_EQ(lin.out[0], 16 * 0.5f * 0.25f + 1.0f);  // the op ran

  const std::vector<OpProfileRow> rows = profile.rows();
  ASSERT_EQ(rows.size(), 2u);
  const OpProfileRow* l = find_row(rows, "linear 8x16x4");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->calls, 2);
  EXPECT_DOUBLE_EQ(l->flops, 2 * 2.0 * 8 * 16 * 4);
  EXPECT_DOUBLE_EQ(l->bytes, 2 * 4.0 * (8 * 4 + 8 * 16 + 16 * 4 + 4));  // out, x, w, bias
  EXPECT_GE(l->wall_s, 0.0);
  EXPECT_GE(l->cpu_s, 0.0);
  const OpProfileRow* s = find_row(rows, "sum_squares");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->calls, 1);
  EXPECT_DOUBLE_EQ(s->flops, 0.0);
  EXPECT_DOUBLE_EQ(s->bytes, 400.0);
}

TEST_F(ProfiledCpuBackend, CausalAttentionCountsTheTriangleItScores) {
  const int B = 2, T = 4, C = 8, NH = 2;
  AttentionArgs a;
  a.B = B, a.T = T, a.NH = NH;
  const AttentionBytes need = be.attention_bytes(B, T, C, NH, a.types);
  std::vector<float> qkv(static_cast<size_t>(B) * T * 3 * C, 0.1f), out(static_cast<size_t>(B) * T * C);
  std::vector<float> saved(need.saved / sizeof(float) + 1), scratch(need.scratch / sizeof(float) + 1);
  a.qkv = View::f32(qkv.data(), {B * T, 3 * C});
  a.out = View::f32(out.data(), {B * T, C});
  a.saved = View::f32(saved.data(), {static_cast<std::int64_t>(saved.size())});
  a.scratch = View::f32(scratch.data(), {static_cast<std::int64_t>(scratch.size())});
  be.attention(a);
  const std::vector<OpProfileRow> rows = profile.rows();
  ASSERT_EQ(rows.size(), 1u);
  // Q·K^T and P·V: 2 products × 2 FLOPs × C per query-key pair; T(T+1)/2 pairs per sequence.
  EXPECT_DOUBLE_EQ(rows[0].flops, 4.0 * C * B * (T * (T + 1) / 2));
}

TEST_F(ProfiledCpuBackend, CapturedWorkIsNotTimedWhenRecorded) {
  Linear lin;
  be.begin_capture();
  be.linear(lin.args());
  std::unique_ptr<Graph> graph = be.end_capture();
  EXPECT_TRUE(profile.rows().empty());
  graph->replay();
  EXPECT_FLOAT_EQ(lin.out[0], 16 * 0.5f * 0.25f + 1.0f);
}

// A backend whose ops run asynchronously (a GPU's) is waited for around each profiled op, so that
// the row holds the op's own time; unprofiled ops are never waited for.
class WaitCountingBackend : public cpu::CpuBackend {
 public:
  using cpu::CpuBackend::CpuBackend;
  int waits = 0;

 protected:
  void run_wait() override { ++waits; }
};

TEST(OpProfileWaits, AnAsynchronousBackendIsWaitedForBeforeAndAfterEachProfiledOp) {
  cpu::Context ctx;
  WaitCountingBackend be{ctx};
  Linear lin;
  be.linear(lin.args());
  EXPECT_EQ(be.waits, 0);  // not profiled: the launch returns at once
  OpProfile profile;
  be.set_profile(&profile);
  be.linear(lin.args());
  EXPECT_EQ(be.waits, 2);
  std::vector<float> v(10, 1.0f);
  EXPECT_EQ(be.sum_squares(View::f32(v.data(), {10})), 10.0);  // an op that answers the host
  EXPECT_EQ(be.waits, 4);
  be.set_profile(nullptr);
  EXPECT_EQ(profile.rows().size(), 2u);
}

}  // namespace
}  // namespace mptrain
