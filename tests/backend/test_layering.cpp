// The layers point one way: src/backend holds kernels, launchers and the device runtime, and
// includes nothing from model/, train/ or optim/ (docs/ARCHITECTURE.md): the models, the step and
// the optimizers are written once above the op interface, and a backend serves ops.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>

namespace {

namespace fs = std::filesystem;

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
  for (const std::string& f : files_reaching_up(MPTRAIN_SOURCE_DIR))
    ADD_FAILURE() << f << " includes model/, train/ or optim/: the backend is kernels and a "
                  << "runtime; put that logic in the model, train or optim layer";
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
