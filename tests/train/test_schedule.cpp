// The learning-rate schedules (optim/schedule.h): BERT's linear decay (warmup, then a straight
// line to min_lr_frac·lr at the last step), cosine unchanged as the default, names parsed.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "optim/schedule.h"

namespace mptrain {
namespace {

TEST(Schedule, LinearWarmupThenLinearDecayToFloor) {
  const LrSchedule s{1.0f, 0.1f, 10, 110, LrShape::Linear};
  EXPECT_FLOAT_EQ(s.at(0), 0.1f);   // warmup: (step + 1) / warmup, as cosine's
  EXPECT_FLOAT_EQ(s.at(9), 1.0f);
  EXPECT_FLOAT_EQ(s.at(10), 1.0f);  // the peak, then down by 0.9 / 100 per step
  EXPECT_NEAR(s.at(35), 0.775f, 1e-6);
  EXPECT_NEAR(s.at(60), 0.55f, 1e-6);  // halfway: the same as cosine's halfway point
  EXPECT_NEAR(s.at(85), 0.325f, 1e-6);
  EXPECT_NEAR(s.at(110), 0.1f, 1e-7);
  EXPECT_NEAR(s.at(500), 0.1f, 1e-7);
  // A straight line: equal decrements.
  for (int i = 12; i < 110; ++i) EXPECT_NEAR(s.at(i - 1) - s.at(i), 0.009f, 1e-6) << i;
}

TEST(Schedule, CosineStaysTheDefaultAndDiffersFromLinear) {
  const LrSchedule cosine{1.0f, 0.1f, 10, 110};
  EXPECT_EQ(cosine.shape, LrShape::Cosine);
  const LrSchedule linear{1.0f, 0.1f, 10, 110, LrShape::Linear};
  // A quarter of the way: cosine 0.1 + 0.9·(1 + cos(π/4))/2, linear 0.1 + 0.9·0.75.
  EXPECT_NEAR(cosine.at(35), 0.1 + 0.45 * (1.0 + std::cos(3.14159265358979 / 4)), 1e-6);
  EXPECT_GT(cosine.at(35), linear.at(35));
  EXPECT_LT(cosine.at(85), linear.at(85));
}

TEST(Schedule, NoWarmupAndMinFracZero) {
  const LrSchedule s{2.0f, 0.0f, 0, 4, LrShape::Linear};
  EXPECT_FLOAT_EQ(s.at(0), 2.0f);
  EXPECT_FLOAT_EQ(s.at(1), 1.5f);
  EXPECT_FLOAT_EQ(s.at(2), 1.0f);
  EXPECT_FLOAT_EQ(s.at(3), 0.5f);
  EXPECT_FLOAT_EQ(s.at(4), 0.0f);
}

TEST(Schedule, ParsesNames) {
  EXPECT_EQ(parse_lr_shape("cosine"), LrShape::Cosine);
  EXPECT_EQ(parse_lr_shape("linear"), LrShape::Linear);
  EXPECT_STREQ(lr_shape_name(LrShape::Linear), "linear");
  EXPECT_STREQ(lr_shape_name(LrShape::Cosine), "cosine");
  try {
    parse_lr_shape("step");
    ADD_FAILURE() << "accepted 'step'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown --schedule 'step' (expected cosine or linear)"), std::string::npos);
  }
}

}  // namespace
}  // namespace mptrain
