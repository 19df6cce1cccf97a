// Graphs on a backend without a native capture (backend/backend.h, "Graphs"): captured ops do
// not run until replayed, each replay runs them again with the arguments they were given, and
// a host transfer or an op that answers a number is refused while capturing, naming it. (The
// CUDA backend's stream capture is checked by tests/cuda; a model's replayed steps by
// tests/train/test_step_in_backend_memory.cpp.)
#include <gtest/gtest.h>

#include <vector>

#include "backend/cpu/context.h"
#include "backend/cpu/cpu_backend.h"
#include "common/host_backend.h"
#include "common/test_util.h"

namespace mptrain {
namespace {

using testing::expect_error;

TEST(Graphs, CapturedOpsRunOnlyWhenReplayedAndAgainAtEachReplay) {
  cpu::CpuBackend be(host_context());
  std::vector<float> x = {1.0f, 2.0f, 3.0f}, y(3, 0.0f);
  const View vx = View::f32(x.data(), {3}), vy = View::f32(y.data(), {3});
  be.begin_capture();
  EXPECT_TRUE(be.capturing());
  be.scale(vx, 2.0f);
  be.accumulate(vy, vx);  // y += x
  const std::unique_ptr<Graph> graph = be.end_capture();
  EXPECT_FALSE(be.capturing());
  EXPECT_EQ(x, (std::vector<float>{1.0f, 2.0f, 3.0f})) << "a captured op ran during the capture";
  EXPECT_EQ(y, (std::vector<float>{0.0f, 0.0f, 0.0f})) << "a captured op ran during the capture";
  graph->replay();
  EXPECT_EQ(x, (std::vector<float>{2.0f, 4.0f, 6.0f}));
  EXPECT_EQ(y, (std::vector<float>{2.0f, 4.0f, 6.0f}));
  graph->replay();  // the same calls again, on what the memory holds now
  EXPECT_EQ(x, (std::vector<float>{4.0f, 8.0f, 12.0f}));
  EXPECT_EQ(y, (std::vector<float>{6.0f, 12.0f, 18.0f}));
  be.scale(vx, 0.5f);  // outside a capture, ops run at once
  EXPECT_EQ(x, (std::vector<float>{2.0f, 4.0f, 6.0f}));
}

TEST(Graphs, HostTransfersAndAnsweringOpsAreRefusedWhileCapturing) {
  cpu::CpuBackend be(host_context());
  std::vector<float> x(4, 1.0f), host(4);
  const View vx = View::f32(x.data(), {4});
  be.begin_capture();
  expect_error([&] { be.download(host.data(), vx); }, "[backend cpu] download while capturing a graph");
  expect_error([&] { be.upload(vx, host.data()); }, "[backend cpu] upload while capturing a graph");
  expect_error([&] { be.sum_squares(vx); }, "[backend cpu] sum_squares while capturing a graph");
  expect_error([&] { be.unscale_and_check(vx, 1.0f); }, "unscale_and_check while capturing a graph");
  expect_error([&] { be.begin_capture(); }, "a graph is already being captured");
  be.end_capture();
  expect_error([&] { be.end_capture(); }, "end_capture without begin_capture");
  EXPECT_EQ(be.sum_squares(vx), 4.0);  // answered again once the capture has ended
}

}  // namespace
}  // namespace mptrain
