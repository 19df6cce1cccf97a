// Learning-rate schedule: linear warmup from lr/warmup to lr over `warmup` steps,
// then cosine decay to lr·min_lr_frac at max_steps (build-nanogpt / llm.c style).
#pragma once
#include <cstdint>

namespace mptrain {

struct LrSchedule {
  float lr = 6e-4f;
  float min_lr_frac = 0.1f;
  int64_t warmup = 0;
  int64_t max_steps = 1;

  // step counts from 0.
  float at(int64_t step) const;
};

}  // namespace mptrain
