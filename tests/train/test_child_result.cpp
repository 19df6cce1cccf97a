// The RESULT-line runner shared by the benches' peers (bench/child_result.h): a child's last
// RESULT line, its numeric and text fields, and its exit status.
#include <gtest/gtest.h>

#include "bench/child_result.h"

namespace mptrain {
namespace {

TEST(ChildResult, ReadsTheLastResultLineAndItsFields) {
  const ChildResult c = run_child(
      "echo 'RESULT ms_per_step=1 torch=0.1'; echo noise; echo 'RESULT ms_per_step=12.5 peak_rss_mb=300.5 "
      "torch=2.11.0+cu130'; echo done");
  ASSERT_TRUE(c.ok()) << c.last_line;
  EXPECT_EQ(c.field("ms_per_step"), 12.5);
  EXPECT_EQ(c.field("peak_rss_mb"), 300.5);
  EXPECT_EQ(c.field("tokens_per_s"), 0.0);
  EXPECT_EQ(c.text_field("torch"), "2.11.0+cu130");  // the last field: up to the line's end
  EXPECT_EQ(c.text_field("ms_per_step"), "12.5");    // a middle one: up to the next space
  EXPECT_EQ(c.text_field("threads"), "");
  EXPECT_EQ(c.last_line, "done");
}

TEST(ChildResult, AFailingChildIsNotOk) {
  const ChildResult c = run_child("echo 'RESULT ms_per_step=3'; exit 3");
  EXPECT_NE(c.exit_status, 0);
  EXPECT_FALSE(c.ok());
}

}  // namespace
}  // namespace mptrain
