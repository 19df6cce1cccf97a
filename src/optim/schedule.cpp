// Warmup, then cosine or linear decay.
#include "optim/schedule.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/named.h"

namespace mptrain {

constexpr NameTable<LrShape, 2> kLrShapeNames{{{LrShape::Cosine, "cosine"}, {LrShape::Linear, "linear"}}};
LrShape parse_lr_shape(const std::string& name) { return parse_in(kLrShapeNames, name, "--schedule"); }
const char* lr_shape_name(LrShape shape) { return name_in(kLrShapeNames, shape); }

float LrSchedule::at(int64_t step) const {
  const double min_lr = static_cast<double>(lr) * min_lr_frac;
  if (step < warmup) return static_cast<float>(static_cast<double>(lr) * (step + 1) / warmup);
  if (step >= max_steps) return static_cast<float>(min_lr);
  const double span = static_cast<double>(std::max<int64_t>(1, max_steps - warmup));
  const double ratio = static_cast<double>(step - warmup) / span;
  const double coeff = shape == LrShape::Linear ? 1.0 - ratio : 0.5 * (1.0 + std::cos(3.14159265358979323846 * ratio));
  return static_cast<float>(min_lr + coeff * (static_cast<double>(lr) - min_lr));
}

}  // namespace mptrain
