// What a non-finite loss or gradient does to a run (--on-nan): the name and its parser, apart
// from the guard itself (train/numeric_guard.h) so that the options can hold the typed value.
#pragma once
#include <string>

namespace mptrain {

enum class NanPolicy { Stop, Rollback };

// "stop" | "rollback"; throws Error naming the accepted values.
NanPolicy parse_nan_policy(const std::string& name);
const char* nan_policy_name(NanPolicy policy);

}  // namespace mptrain
