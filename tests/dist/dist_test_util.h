// Shared by the distributed tests: launching commands under Open MPI's mpirun on this machine
// (loopback only: the shared-memory and self transports), finding one rank's process, this
// test executable's own path (MPI worker tests re-run it under mpirun), and comparing the
// runs and checkpoints of `mptrain train` on different world sizes (GPT-2 and BERT alike).
#pragma once
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "io/safetensors.h"

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

// `mptrain train <arguments>` in one process, or under mpirun on `ranks` ranks.
inline RunResult train(int ranks, const std::string& arguments) {
  const std::string cmd = ranks == 1 ? std::string(MPTRAIN_BINARY) + " " + arguments
                                     : mpirun(ranks) + " " + MPTRAIN_BINARY + " " + arguments;
  return run_command(cmd);
}

inline std::vector<float> read_tensor(const SafetensorsFile& f, const std::string& name) {
  const TensorView& t = f.get(name);
  std::vector<float> out(t.numel());
  f.read_f32(name, t.shape, out.data());
  return out;
}

// Final parameters of two checkpoints: per tensor ‖a − b‖ ≤ rtol·‖b‖ + atol·√n, except the
// attention key biases (GPT-2's middle third of c_attn.bias, BERT's attention.self.key.bias):
// their gradient is zero in exact arithmetic (softmax ignores a constant added to every key), so
// they hold AdamW's normalised rounding noise, of a few 1e-6 in both runs; checked against
// key_atol. atol: a zero-initialised tensor whose updates (each about the learning rate, ~1e-3)
// cancel leaves a final value far below the way it travelled (BERT's NSP bias: ±1.7e-4 after
// eight steps of ~1e-3), where relative error only measures that cancellation; 1e-9 is a few
// fp32 ulps of such updates (2.3e-10 at 3e-3), far below what a wrong gradient or a dropped
// update moves (a step: ~1e-3).
inline void expect_parameters_close(const std::string& a_dir, const std::string& b_dir, double rtol = 2e-6,
                                    double key_atol = 2e-5, double atol = 1e-9) {
  SafetensorsFile a(a_dir + "/model.safetensors"), b(b_dir + "/model.safetensors");
  ASSERT_EQ(a.names(), b.names());
  for (const auto& name : a.names()) {
    std::vector<float> x = read_tensor(a, name), y = read_tensor(b, name);
    ASSERT_EQ(x.size(), y.size()) << name;
    size_t key_lo = 0, key_hi = 0;  // the key bias range within the tensor
    if (name.find("attn.c_attn.bias") != std::string::npos) key_lo = x.size() / 3, key_hi = 2 * x.size() / 3;
    if (name.find("attention.self.key.bias") != std::string::npos) key_hi = x.size();
    for (size_t i = key_lo; i < key_hi; ++i)
      EXPECT_NEAR(x[i], y[i], key_atol) << name << "[" << i << "] (key bias)";
    x.erase(x.begin() + key_lo, x.begin() + key_hi);
    y.erase(y.begin() + key_lo, y.begin() + key_hi);
    if (x.empty()) continue;
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
      diff += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
      norm += static_cast<double>(y[i]) * y[i];
    }
    EXPECT_LE(std::sqrt(diff), rtol * std::sqrt(norm) + atol * std::sqrt(static_cast<double>(x.size())))
        << name << ": relative error " << relative_error(x.data(), y.data(), x.size());
  }
}

inline void expect_losses_close(const std::vector<std::pair<int64_t, double>>& a,
                                const std::vector<std::pair<int64_t, double>>& b, double rtol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_NEAR(a[i].second, b[i].second, rtol * std::abs(b[i].second)) << "step " << a[i].first;
  }
}

// One metric of every step record of a run's metrics.jsonl (records without it are skipped), by step.
inline std::vector<std::pair<int64_t, double>> read_metric(const std::string& run_dir,
                                                           const std::string& key) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::vector<std::pair<int64_t, double>> out;
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("step") && j.contains(key))
      out.emplace_back(j["step"].get<int64_t>(), j[key].get<double>());
  }
  return out;
}

}  // namespace mptrain::testing
