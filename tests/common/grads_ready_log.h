// What a model's gradient-ready hook (model/weight_grads.h) hands during one backward: the
// ranges, in order, and the gradients in each when it was handed, to check that every range was
// handed once and was final by then.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/param_table.h"
#include "model/weight_grads.h"

namespace mptrain::test {

struct GradsReadyLog {
  std::vector<ParamRange> ranges;
  std::vector<std::vector<float>> values;

  GradsReadyHook hook(const FloatBuffer& grads) {
    return [this, &grads](ParamRange r) {
      ranges.push_back(r);
      values.emplace_back(grads.data() + r.begin, grads.data() + r.end);
    };
  }
  void clear() { ranges.clear(), values.clear(); }

  // The ranges cover [0, n) without overlap, and each held then what grads holds now.
  void expect_every_range_once_and_final(const FloatBuffer& grads, size_t n, const std::string& what) const {
    std::vector<ParamRange> sorted = ranges;
    std::sort(sorted.begin(), sorted.end(),
              [](const ParamRange& a, const ParamRange& b) { return a.begin < b.begin; });
    size_t at = 0;
    for (const ParamRange& r : sorted) {
      EXPECT_EQ(r.begin, at) << what << ": a gap or an overlap before [" << r.begin << ", " << r.end << ")";
      at = r.end;
    }
    EXPECT_EQ(at, n) << what << ": the ranges end before the table";
    for (size_t k = 0; k < ranges.size(); ++k)
      for (size_t i = 0; i < values[k].size(); ++i)
        ASSERT_EQ(values[k][i], grads[ranges[k].begin + i])
            << what << ": range " << k << " [" << ranges[k].begin << ", " << ranges[k].end
            << ") changed after it was handed, at " << ranges[k].begin + i;
  }
};

// Two accumulated micro-batches through `pass` (one forward and backward of model m) with m's
// hook set: after each, the ranges handed are `expected`, in that order, and each was final.
template <class Model, class Pass>
void expect_grads_ready_in_order(Model& m, const std::vector<ParamRange>& expected, const std::string& plan,
                                 Pass pass) {
  GradsReadyLog log;
  m.set_grads_ready_hook(log.hook(m.grads()));
  m.zero_grad();
  for (int micro = 0; micro < 2; ++micro) {
    const std::string what = plan + ", micro-batch " + std::to_string(micro);
    log.clear();
    pass();
    log.expect_every_range_once_and_final(m.grads(), m.num_params(), what);
    ASSERT_EQ(log.ranges.size(), expected.size()) << what;
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_EQ(log.ranges[i].begin, expected[i].begin) << what << ", range " << i;
      EXPECT_EQ(log.ranges[i].end, expected[i].end) << what << ", range " << i;
    }
  }
  m.set_grads_ready_hook({});
}

}  // namespace mptrain::test
