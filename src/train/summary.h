// What a training run reports when it ends (train/trainer.h's run_training, train/run_monitor.h's
// final line).
#pragma once
#include <cstdint>
#include <string>

namespace mptrain {

struct TrainSummary {
  int64_t steps_done = 0;
  float final_train_loss = 0.0f;
  float final_val_loss = -1.0f;  // -1 when no validation data
  std::string last_checkpoint;
  int stopped_by_signal = 0;  // SIGINT/SIGTERM that ended the run early (checkpoint written); 0 = ran to the end
};

}  // namespace mptrain
