// Validation and serialisation of training options.
#include "train/options.h"

#include "core/error.h"

namespace mptrain {

int TrainOptions::grad_accum_steps() const {
  const int64_t micro = static_cast<int64_t>(batch) * seq;
  if (total_batch_tokens == 0) return 1;
  MPT_CHECK(total_batch_tokens > 0 && total_batch_tokens % micro == 0,
            "--total-batch " + std::to_string(total_batch_tokens) + " is not a positive multiple of batch x seq = " +
                std::to_string(micro));
  return static_cast<int>(total_batch_tokens / micro);
}

nlohmann::json TrainOptions::to_json() const {
  return {{"preset", preset},
          {"init_from", init_from},
          {"vocab_multiple", vocab_multiple},
          {"train_data", train_data},
          {"val_data", val_data},
          {"batch", batch},
          {"seq", seq},
          {"total_batch_tokens", total_batch_tokens},
          {"steps", steps},
          {"lr", lr},
          {"min_lr_frac", min_lr_frac},
          {"warmup", warmup},
          {"beta1", adamw.beta1},
          {"beta2", adamw.beta2},
          {"eps", adamw.eps},
          {"weight_decay", adamw.weight_decay},
          {"grad_clip", grad_clip},
          {"val_every", val_every},
          {"val_steps", val_steps},
          {"save_every", save_every},
          {"seed", seed},
          {"deterministic", deterministic},
          {"threads", threads}};
}

}  // namespace mptrain
