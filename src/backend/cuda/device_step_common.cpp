// The steps the device steppers share (backend/cuda/device_step_common.h).
#include "backend/cuda/device_step_common.h"

namespace mptrain::cuda {

bool finish_step(StepStats& stats, double loss_sum, int accum, float lr, float grad_clip, int64_t t,
                 DeviceOptimizer& optimizer, DeviceDataParallel& dp, Context& ctx) {
  loss_sum = dp.sum_over_ranks(loss_sum);
  stats.loss = static_cast<float>(loss_sum / (static_cast<double>(accum) * dp.world_size()));
  const DeviceOptimizer::GuardedStep g = optimizer.guarded_step(stats.loss, lr, grad_clip, t);
  stats.grad_norm = g.grad_norm;
  stats.skipped = g.skipped;
  stats.non_finite = g.non_finite;
  if (g.skipped || g.non_finite) return false;
  dp.gather_params(optimizer, ctx);
  return optimizer.curvature_due(t);
}

void finish_curvature(StepStats& stats, double loss, float grad_clip, DeviceOptimizer& optimizer,
                      DeviceDataParallel& dp) {
  stats.curvature_loss = static_cast<float>(dp.sum_over_ranks(loss) / dp.world_size());
  const DeviceOptimizer::Curvature c = optimizer.update_curvature(grad_clip);
  stats.curvature = c.made;
  stats.curvature_norm = c.norm;
  stats.win_rate = c.win_rate;
}

}  // namespace mptrain::cuda
