// Reloading a checkpoint into a running training: the optimizer state of --resume and of an --on-nan
// rollback (train/numeric_guard.h chooses the checkpoint), for any model family (train/train_task.h).
#pragma once
#include <string>

#include "dist/data_parallel.h"
#include "optim/optimizer.h"
#include "train/checkpoint.h"
#include "train/train_task.h"

namespace mptrain {

// ckpt_dir's optimizer state into `optimizer`: whole, or this rank's shard under ZeRO-1 (every rank
// reads the checkpoint, written whole by rank 0 whatever the world size then).
void load_optimizer_state(const std::string& ckpt_dir, const TrainTask& task, Optimizer& optimizer,
                          DataParallel& dp, const OptimizerFactory& make_optimizer);

// Reloads ckpt_dir for a rollback, for any model family (train/train_task.h): weights,
// optimizer state (this rank's shard under ZeRO-1, as on --resume), the run state (step,
// sampler counter) and the task's data position; the parameters are then broadcast from
// rank 0. The state returned keeps `current`'s run fields (options, precision, loss scaler)
// and records the rollback: lr_scale = current.lr_scale * lr_factor, nan_rollbacks + 1.
RunState rollback_to_checkpoint(const std::string& ckpt_dir, float lr_factor, const RunState& current,
                                TrainTask& task, Optimizer& optimizer, DataParallel& dp,
                                const OptimizerFactory& make_optimizer);

}  // namespace mptrain
