// The layers point one way: src/backend holds kernels, launchers and the device runtime, and
// includes nothing from model/, train/ or optim/ (docs/ARCHITECTURE.md). Today's CUDA model
// code still does; those files are listed here and the list only shrinks: a new file that
// reaches up fails, and a listed file that no longer does fails until it is struck off, so the
// redesign (issue 19) cannot slide back. The test ends with the list empty.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>

namespace {

namespace fs = std::filesystem;

// The files of the device model code (gpt2_device*, bert_device*, the device optimizer and
// step) that the CUDA backend behind the op interface deletes.
const std::set<std::string> kStillReachingUp = {
    "src/backend/cuda/bert_bench.cpp",         "src/backend/cuda/bert_device.h",
    "src/backend/cuda/bert_device_pass.cpp",   "src/backend/cuda/bert_device_step.cpp",
    "src/backend/cuda/device_data_parallel.h", "src/backend/cuda/device_optimizer.cpp",
    "src/backend/cuda/device_optimizer.h",     "src/backend/cuda/device_step_common.h",
    "src/backend/cuda/gpt2_bench.cpp",         "src/backend/cuda/gpt2_device.cpp",
    "src/backend/cuda/gpt2_device.h",          "src/backend/cuda/gpt2_device_impl.h",
    "src/backend/cuda/gpt2_device_step.cpp",   "src/backend/nocuda/bert_bench.cpp",
    "src/backend/nocuda/bert_device_step.cpp", "src/backend/nocuda/gpt2_bench.cpp",
    "src/backend/nocuda/gpt2_device_step.cpp",
};

// The files under src/backend with an #include of model/, train/ or optim/.
std::set<std::string> files_reaching_up(const fs::path& root) {
  const std::regex up(R"re(^\s*#\s*include\s*"(model|train|optim)/)re");
  std::set<std::string> found;
  for (const auto& e : fs::recursive_directory_iterator(root / "src/backend")) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path());
    std::string line;
    while (std::getline(in, line))
      if (std::regex_search(line, up)) {
        found.insert(fs::relative(e.path(), root).generic_string());
        break;
      }
  }
  return found;
}

TEST(Layering, BackendIncludesNothingFromModelTrainOrOptim) {
  ASSERT_TRUE(fs::exists(fs::path(MPTRAIN_SOURCE_DIR) / "src/backend"))
      << "no source tree at " << MPTRAIN_SOURCE_DIR;
  const std::set<std::string> found = files_reaching_up(MPTRAIN_SOURCE_DIR);
  for (const std::string& f : found)
    EXPECT_TRUE(kStillReachingUp.count(f))
        << f << " includes model/, train/ or optim/: the backend is kernels and a "
        << "runtime; put that logic in the model, train or optim layer";
  for (const std::string& f : kStillReachingUp)
    EXPECT_TRUE(found.count(f)) << f << " no longer reaches up (or is gone): strike it off kStillReachingUp";
}

// The scan itself finds an upward include (so that an empty result means something).
TEST(Layering, TheScanSeesAnUpwardInclude) {
  const fs::path root = fs::temp_directory_path() / ("mptrain_layering_" + std::to_string(::getpid()));
  fs::create_directories(root / "src/backend/cpu");
  std::ofstream(root / "src/backend/cpu/clean.cpp") << "#include \"core/dtype.h\"\n";
  std::ofstream(root / "src/backend/cpu/bad.cpp") << "// note\n  #  include \"optim/adamw.h\"\n";
  const std::set<std::string> found = files_reaching_up(root);
  fs::remove_all(root);
  EXPECT_EQ(found, std::set<std::string>{"src/backend/cpu/bad.cpp"});
}

}  // namespace
