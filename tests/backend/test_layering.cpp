// The layers point one way (docs/ARCHITECTURE.md):
//  - src/backend holds kernels, launchers and the device runtime, and includes nothing from
//    model/, train/ or optim/: the models, the step and the optimizers are written once above the
//    op interface, and a backend serves ops;
//  - src/eval runs models without training them, and includes nothing from train/, bench/ or cli/
//    (training uses evaluation, not the other way);
//  - src/train includes nothing from bench/ or cli/ (the benchmark times training's step).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>

namespace {

namespace fs = std::filesystem;

// The files under root/src/<folder> with an #include of one of `above` ("model|train|optim").
std::set<std::string> files_reaching_up(const fs::path& root, const std::string& folder,
                                        const std::string& above) {
  const std::regex up("^\\s*#\\s*include\\s*\"(" + above + ")/");
  std::set<std::string> found;
  for (const auto& e : fs::recursive_directory_iterator(root / "src" / folder)) {
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

void expect_no_upward_include(const std::string& folder, const std::string& above, const std::string& why) {
  const fs::path root(MPTRAIN_SOURCE_DIR);
  ASSERT_TRUE(fs::exists(root / "src" / folder)) << "no src/" << folder << " under " << MPTRAIN_SOURCE_DIR;
  for (const std::string& f : files_reaching_up(root, folder, above))
    ADD_FAILURE() << f << " includes one of " << above << "/: " << why;
}

TEST(Layering, BackendIncludesNothingFromModelTrainOrOptim) {
  expect_no_upward_include(
      "backend", "model|train|optim",
      "the backend is kernels and a runtime; put that logic in the model, train or optim layer");
}

TEST(Layering, EvalIncludesNothingFromTrainBenchOrCli) {
  expect_no_upward_include("eval", "train|bench|cli",
                           "evaluation runs a model without training it; training and the commands use it");
}

TEST(Layering, TrainIncludesNothingFromBenchOrCli) {
  expect_no_upward_include("train", "bench|cli",
                           "the benchmark and the commands use training, not the other way");
}

// The scan itself finds an upward include (so that an empty result means something).
TEST(Layering, TheScanSeesAnUpwardInclude) {
  const fs::path root = fs::temp_directory_path() / ("mptrain_layering_" + std::to_string(::getpid()));
  fs::create_directories(root / "src/backend/cpu");
  std::ofstream(root / "src/backend/cpu/clean.cpp") << "#include \"core/dtype.h\"\n";
  std::ofstream(root / "src/backend/cpu/bad.cpp") << "// note\n  #  include \"optim/adamw.h\"\n";
  const std::set<std::string> found = files_reaching_up(root, "backend", "model|train|optim");
  fs::remove_all(root);
  EXPECT_EQ(found, std::set<std::string>{"src/backend/cpu/bad.cpp"});
}

}  // namespace
