// Reloading a checkpoint into a running training (train/rollback.h).
#include "train/rollback.h"

#include <memory>

namespace mptrain {

void load_optimizer_state(const std::string& ckpt_dir, const TrainTask& task, Optimizer& optimizer,
                          DataParallel& dp, const OptimizerFactory& make_optimizer) {
  if (!dp.sharded()) {
    load_checkpoint_optimizer(ckpt_dir, task.table(), optimizer);
    return;
  }
  std::unique_ptr<Optimizer> whole = make_optimizer(task.table());
  load_checkpoint_optimizer(ckpt_dir, task.table(), *whole);
  dp.scatter_optimizer(*whole, optimizer);
}

RunState rollback_to_checkpoint(const std::string& ckpt_dir, float lr_factor, const RunState& current,
                                TrainTask& task, Optimizer& optimizer, DataParallel& dp,
                                const OptimizerFactory& make_optimizer) {
  const RunState loaded = task.read_state(ckpt_dir);  // checked before anything is overwritten
  task.load_weights(ckpt_dir);
  load_optimizer_state(ckpt_dir, task, optimizer, dp, make_optimizer);
  dp.broadcast_params(task.params());
  task.seek_to_checkpoint();
  RunState next = current;
  next.step = loaded.step;
  next.sample_counter = loaded.sample_counter;
  next.lr_scale = current.lr_scale * lr_factor;
  next.nan_rollbacks = current.nan_rollbacks + 1;
  return next;
}

}  // namespace mptrain
