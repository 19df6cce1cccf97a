// The benches' quietness figures (core/quietness.h): /proc/stat parsing, the arithmetic of
// "CPU others took" between two samples, and when a ratio gets the busy-machine warning.
#include <gtest/gtest.h>

#include "core/quietness.h"

namespace mptrain {
namespace {

TEST(Quietness, ParsesTheCpuLineOfProcStat) {
  // user nice system idle iowait irq softirq steal guest guest_nice, in ticks of 1/100 s
  const std::string stat = "cpu  1000 50 300 90000 20 10 40 200 0 0\ncpu0 500 25 150 45000 10 5 20 100 0 0\n";
  double busy = 0, steal = 0;
  ASSERT_TRUE(parse_proc_stat(stat, 100.0, busy, steal));
  EXPECT_DOUBLE_EQ(busy, (1000 + 50 + 300 + 10 + 40) / 100.0);  // idle and iowait are not busy
  EXPECT_DOUBLE_EQ(steal, 2.0);
  EXPECT_FALSE(parse_proc_stat("intr 1 2 3\n", 100.0, busy, steal));
  EXPECT_FALSE(parse_proc_stat("cpu 1 2\n", 100.0, busy, steal));
}

TEST(Quietness, OthersAreTheBusyTimeThatIsNotOurs) {
  CpuSample a{100.0, 5.0, 10.0, 1000.0}, b{130.0, 5.0, 38.0, 1020.0};
  // 30 s busy in 20 s of wall time, 28 of them ours: others used 0.1 cores.
  Quietness q = quietness_between(a, b, 0.3);
  EXPECT_DOUBLE_EQ(q.wall_s, 20.0);
  EXPECT_NEAR(q.others_cores, 0.1, 1e-12);
  EXPECT_DOUBLE_EQ(q.load_before, 0.3);
  EXPECT_FALSE(q.busy());  // at the threshold, not over it
  EXPECT_EQ(q.warning(), "");
  b.busy_s = 140.0;  // others took 12 s: 0.6 cores
  q = quietness_between(a, b, 0.3);
  EXPECT_NEAR(q.others_cores, 0.6, 1e-12);
  EXPECT_TRUE(q.busy());
  EXPECT_EQ(q.warning(), "machine busy (others used 0.60 cores): ratio not reliable");
  // Counter granularity can make ours exceed the machine's busy time by a tick: never negative.
  b.busy_s = 127.9;
  EXPECT_EQ(quietness_between(a, b, 0.0).others_cores, 0.0);
  // Steal (other virtual machines on the host) alone also makes a ratio unreliable.
  b.busy_s = 128.0, b.steal_s = 9.0;
  q = quietness_between(a, b, 0.0);
  EXPECT_NEAR(q.steal_cores, 0.2, 1e-12);
  EXPECT_EQ(q.others_cores, 0.0);
  EXPECT_TRUE(q.busy());
  EXPECT_NE(q.describe().find("steal 0.20"), std::string::npos) << q.describe();
}

TEST(Quietness, TheMeterReadsThisMachine) {
  const QuietnessMeter meter;
  volatile double x = 0;
  for (int i = 0; i < 20000000; ++i) x = x + 1e-9;  // some CPU time of our own
  const Quietness q = meter.finish();
  EXPECT_GT(q.wall_s, 0.0);
  EXPECT_GE(q.others_cores, 0.0);
  EXPECT_GE(q.load_before, 0.0);
  EXPECT_NE(q.describe().find("load average"), std::string::npos);
}

}  // namespace
}  // namespace mptrain
