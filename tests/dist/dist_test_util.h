// Shared by the distributed tests: launching commands under Open MPI's mpirun on this machine
// (loopback only: the shared-memory and self transports), finding one rank's process, and
// this test executable's own path (MPI worker tests re-run it under mpirun).
#pragma once
#include <dirent.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/test_util.h"

namespace mptrain::testing {

inline bool have_mpirun() { return run_command("command -v mpirun >/dev/null 2>&1").exit_code == 0; }

// "mpirun ... -np N": as root (the CI runs as root), more ranks than cores allowed, no core
// binding (ranks of several tests may share the 2 cores), shared memory between ranks on this
// machine with no single-copy (ptrace-based copies are refused in containers), and waiting
// ranks yielding the core instead of spinning (on a busy 2-core machine a spinning rank
// starves the one it waits for).
inline std::string mpirun(int ranks) {
  return "mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader "
         "--mca btl_vader_single_copy_mechanism none --mca mpi_yield_when_idle 1 -np " +
         std::to_string(ranks);
}

inline std::string self_executable() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The pid of the process whose command line contains `marker` and whose environment says it
// is MPI rank `rank`; -1 if there is none (yet).
inline pid_t find_rank_pid(const std::string& marker, int rank) {
  const std::string want = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string cmdline = read_text(entry.path().string() + "/cmdline");
    if (cmdline.find(marker) == std::string::npos || cmdline.find("mptrain") == std::string::npos) continue;
    std::string env = read_text(entry.path().string() + "/environ");
    std::istringstream vars(env);
    std::string var;
    while (std::getline(vars, var, '\0'))
      if (var == want) return static_cast<pid_t>(std::stol(name));
  }
  return -1;
}

}  // namespace mptrain::testing
