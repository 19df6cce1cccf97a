// Numeric guards: a non-finite loss or gradient never reaches the weights, and no checkpoint
// ever holds a NaN or an inf.
//
// fp16 has its LossScaler, which skips a step whose unscaled gradients are not finite. fp32,
// tf32 and bf16 have nothing of the kind, so train_step checks the loss and the global
// gradient norm it computes anyway (one isfinite on two numbers: free) and, when either is
// not finite, returns before clipping and the optimizer (StepStats::non_finite). Only then is
// the gradient buffer scanned, parameter by parameter in table order, to name the first one
// that went non-finite. The trainer then applies --on-nan:
//   stop      (default) the run ends with one error line naming the step and the parameter
//   rollback  the last good checkpoint of the run (or the one it resumed from) is reloaded
//             (weights, optimizer state, data position, step), the learning rate is
//             multiplied by --nan-lr-factor from then on (state.json "lr_scale", so a resume
//             keeps it) and training continues; after --nan-max-rollbacks rollbacks in one
//             invocation the run stops with an error instead.
// Every checkpoint save first checks parameters and optimizer state and refuses, loudly, to
// write a non-finite value.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/param_table.h"
#include "dist/data_parallel.h"
#include "optim/optimizer.h"
#include "train/nan_policy.h"

namespace mptrain {

struct NanGuardOptions {
  NanPolicy policy = NanPolicy::Stop;
  float lr_factor = 0.5f;  // learning rate multiplier per rollback, in (0, 1)
  int max_rollbacks = 3;   // rollbacks in one invocation before the run gives up
};
// Throws Error for a factor outside (0, 1) or a negative count.
void validate(const NanGuardOptions& options);

// The first non-finite element of buf[lo, hi) (flat offsets, as in the table), in table order.
struct NonFinite {
  std::string param;  // Hugging Face name from the parameter table
  size_t index = 0;   // element within that parameter
  float value = 0.0f;
};
std::optional<NonFinite> first_non_finite(const ParamTable& table, const float* buf, size_t lo, size_t hi);

// One line for a step whose loss or gradient norm was not finite, e.g.
//   "non-finite gradient at step 7 (loss 5.4, grad norm nan); first non-finite gradient:
//    h.0.attn.c_attn.weight (element 17 = nan); the weights were not updated"
// grads[lo, hi) is scanned only here, i.e. only for a bad step.
std::string non_finite_step_message(int64_t step, float loss, double grad_norm, const ParamTable& table,
                                    const float* grads, size_t lo, size_t hi);

// Throws Error "refusing to save checkpoint <name>: parameter <p> (element i) is nan ..." when
// params, or any optimizer state buffer (prefix, buffer laid out by the table), holds a
// non-finite value.
void check_finite_before_save(const std::string& checkpoint, const ParamTable& table, const float* params,
                              const std::vector<std::pair<std::string, const float*>>& state);

// The checkpoint a rollback reloads: the run dir's latest (verified) checkpoint, else the one
// the run resumed from. Throws Error (what, plus why the run stops) under --on-nan stop, when
// rollbacks_done has reached the maximum, or when there is no checkpoint to go back to.
std::string rollback_target(const NanGuardOptions& options, const std::string& what, const std::string& run_dir,
                            const std::string& resume_dir, int rollbacks_done);


// TEST-ONLY hook, read in this one place: MPTRAIN_TEST_INJECT_NAN="<step>:<parameter name>"
// makes train_step write a NaN into the first element of that parameter's gradient after
// backward of optimizer step <step> (1-based), once per process and value (a rollback that
// replays the step then runs clean). Elements outside grads[lo, hi) (another rank's ZeRO shard) are left
// alone. A malformed value or an unknown name throws Error. Unset: nothing happens.
void inject_test_nan(const ParamTable& table, FloatBuffer& grads, size_t lo, size_t hi, int64_t step);

}  // namespace mptrain
