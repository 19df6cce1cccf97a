// Numeric guards: naming the first non-finite parameter, refusing non-finite checkpoints,
// choosing the checkpoint a rollback reloads (train/rollback.h reloads it), and the test-only NaN
// injection.
#include "train/numeric_guard.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "core/named.h"
#include "io/checkpoint_dir.h"

namespace mptrain {

namespace {

std::string value_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

std::string describe(const NonFinite& nf) {
  return nf.param + " (element " + std::to_string(nf.index) + " = " + value_text(nf.value) + ")";
}

}  // namespace

constexpr NameTable<NanPolicy, 2> kNanPolicyNames{{{NanPolicy::Stop, "stop"}, {NanPolicy::Rollback, "rollback"}}};
NanPolicy parse_nan_policy(const std::string& name) { return parse_in(kNanPolicyNames, name, "--on-nan"); }
const char* nan_policy_name(NanPolicy policy) { return name_in(kNanPolicyNames, policy); }

void validate(const NanGuardOptions& o) {
  MPT_CHECK(o.lr_factor > 0.0f && o.lr_factor < 1.0f,
            "--nan-lr-factor must be in (0, 1), got " + value_text(o.lr_factor));
  MPT_CHECK(o.max_rollbacks >= 0, "--nan-max-rollbacks must be >= 0, got " + std::to_string(o.max_rollbacks));
}

std::optional<NonFinite> first_non_finite(const ParamTable& table, const float* buf, size_t lo, size_t hi) {
  for (const ParamSpec& spec : table.specs()) {
    const size_t begin = std::max(spec.offset, lo), end = std::min(spec.offset + spec.numel, hi);
    for (size_t i = begin; i < end; ++i)
      if (!std::isfinite(buf[i])) return NonFinite{spec.name, i - spec.offset, buf[i]};
  }
  return std::nullopt;
}

std::string non_finite_step_message(int64_t step, float loss, double grad_norm, const ParamTable& table,
                                    const float* grads, size_t lo, size_t hi) {
  const bool bad_grad = !std::isfinite(grad_norm);
  std::string msg = std::string(bad_grad ? "non-finite gradient" : "non-finite loss") + " at step " +
                    std::to_string(step) + " (loss " + value_text(loss) + ", grad norm " + value_text(grad_norm) + ")";
  if (const auto nf = first_non_finite(table, grads, lo, hi))
    msg += "; first non-finite gradient: " + describe(*nf);
  else if (bad_grad)
    msg += "; every gradient in this rank's range is finite (the non-finite one is on another rank)";
  return msg + "; the weights were not updated";
}

void check_finite_before_save(const std::string& checkpoint, const ParamTable& table, const float* params,
                              const std::vector<std::pair<std::string, const float*>>& state) {
  const std::string refuse = "refusing to save checkpoint " + checkpoint + ": ";
  if (const auto nf = first_non_finite(table, params, 0, table.total()))
    throw Error(refuse + "parameter " + describe(*nf) + " is not finite; the previous checkpoint is kept");
  for (const auto& [prefix, buffer] : state)
    if (const auto nf = first_non_finite(table, buffer, 0, table.total()))
      throw Error(refuse + "optimizer state " + prefix + "." + describe(*nf) +
                  " is not finite; the previous checkpoint is kept");
}

std::string rollback_target(const NanGuardOptions& o, const std::string& what, const std::string& run_dir,
                            const std::string& resume_dir, int rollbacks_done) {
  if (o.policy == NanPolicy::Stop)
    throw Error(what + "; stopping (--on-nan rollback would reload the last checkpoint with a lower learning rate)");
  if (rollbacks_done >= o.max_rollbacks)
    throw Error(what + "; giving up after " + std::to_string(rollbacks_done) + " rollback(s) (--nan-max-rollbacks " +
                std::to_string(o.max_rollbacks) + ")");
  std::error_code ec;
  const bool have_run_checkpoint = std::filesystem::exists(run_dir + "/" + kCheckpointLatestFile, ec);
  if (!have_run_checkpoint && resume_dir.empty())
    throw Error(what + "; no checkpoint to roll back to yet in '" + run_dir +
                "' (save earlier with --save-every N)");
  try {
    return resolve_checkpoint(have_run_checkpoint ? run_dir : resume_dir);  // verified
  } catch (const Error& e) {
    throw Error(what + "; cannot roll back: " + e.what());
  }
}

void inject_test_nan(const ParamTable& table, FloatBuffer& grads, size_t lo, size_t hi, int64_t step) {
  const char* env = std::getenv("MPTRAIN_TEST_INJECT_NAN");  // a few ns per step when unset
  if (!env || !*env) return;
  const std::string v = env;
  // Once per process and value (see the header); train_step runs on one thread.
  static std::string fired;
  if (v == fired) return;
  const size_t colon = v.find(':');
  char* end = nullptr;
  const long long at = colon == std::string::npos ? -1 : std::strtoll(v.c_str(), &end, 10);
  if (colon == std::string::npos || end != v.c_str() + colon || at < 1)
    throw Error("MPTRAIN_TEST_INJECT_NAN='" + v + "': expected <step>:<parameter name>, e.g. 3:h.0.mlp.c_fc.weight");
  const size_t offset = table.get(v.substr(colon + 1)).offset;  // throws for an unknown name
  if (at != step) return;
  fired = v;
  const float nan = std::nanf("");
  if (offset >= lo && offset < hi) grads.upload(&nan, 1, offset);  // wherever the gradients live
}

}  // namespace mptrain
