// Learning-rate schedules: linear warmup from lr/warmup to lr over `warmup` steps, then a decay
// to lr·min_lr_frac at max_steps, either
//   cosine  half a cosine (build-nanogpt / llm.c style; GPT-2's default), or
//   linear  a straight line (the original BERT recipe: warmup, then linear decay).
#pragma once
#include <cstdint>
#include <string>

namespace mptrain {

enum class LrShape { Cosine, Linear };

// "cosine" | "linear"; throws Error naming the accepted values.
LrShape parse_lr_shape(const std::string& name);
const char* lr_shape_name(LrShape shape);

struct LrSchedule {
  float lr = 6e-4f;
  float min_lr_frac = 0.1f;
  int64_t warmup = 0;
  int64_t max_steps = 1;
  LrShape shape = LrShape::Cosine;

  // step counts from 0.
  float at(int64_t step) const;
};

}  // namespace mptrain
