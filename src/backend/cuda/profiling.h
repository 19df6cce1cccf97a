// A named profiling range around each launcher (NVTX, header-only in CUDA 12+: no library to
// link; the calls cost a few nanoseconds and do nothing unless a profiler such as Nsight
// Systems is attached). MPT_PROFILE_RANGE("layernorm_forward") at the top of a launcher.
#pragma once
#include <nvtx3/nvToolsExt.h>

namespace mptrain::cuda {

class ProfileRange {
 public:
  explicit ProfileRange(const char* name) { nvtxRangePushA(name); }
  ~ProfileRange() { nvtxRangePop(); }
  ProfileRange(const ProfileRange&) = delete;
  ProfileRange& operator=(const ProfileRange&) = delete;
};

}  // namespace mptrain::cuda

#define MPT_PROFILE_CONCAT2(a, b) a##b
#define MPT_PROFILE_CONCAT(a, b) MPT_PROFILE_CONCAT2(a, b)
#define MPT_PROFILE_RANGE(name) \
  ::mptrain::cuda::ProfileRange MPT_PROFILE_CONCAT(profile_range_, __LINE__)(name)
