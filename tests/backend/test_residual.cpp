// residual_forward (with aliasing) and accumulate, at lengths around the vector widths.
#include <gtest/gtest.h>

#include "backend/ops/residual.h"
#include "op_test_util.h"

namespace mptrain::cpu {
namespace {

using test::all_close;
using test::Guarded;

const size_t kSizes[] = {1, 15, 16, 17, 31, 32, 33, 127, 128, 129, 100003};

TEST(Residual, Forward) {
  for (size_t n : kSizes) {
    auto a = test::randn(n, 1), b = test::randn(n, 2);
    Guarded out(n);
    residual_forward(out.data(), a.data(), b.data(), n);
    std::vector<double> ref(n);
    for (size_t i = 0; i < n; ++i) ref[i] = static_cast<double>(a[i]) + b[i];
    EXPECT_TRUE(all_close(out.values(), ref, {0.0, 6e-8}, "residual_forward n=" + std::to_string(n)));
    EXPECT_TRUE(out.guards_intact());
    // out aliasing a, then b
    auto a2 = a;
    residual_forward(a2.data(), a2.data(), b.data(), n);
    EXPECT_TRUE(all_close(a2, ref, {0.0, 6e-8}, "residual_forward out=a"));
    auto b2 = b;
    residual_forward(b2.data(), a.data(), b2.data(), n);
    EXPECT_TRUE(all_close(b2, ref, {0.0, 6e-8}, "residual_forward out=b"));
  }
}

}  // namespace
}  // namespace mptrain::cpu
