// `mptrain train --config FILE.toml` (cli/commands.cpp): a [train] table of options, overridden
// by the same options on the command line; a key that is no option of train is one clear
// error; and every shipped recipe (recipes/*.toml) parses, up to the data it names.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "train/train_test_util.h"

namespace mptrain {
namespace {

namespace fs = std::filesystem;
using testing::expect_clear_error;
using testing::run_mptrain;
using testing::TempDir;

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

nlohmann::json options_of(const std::string& run_dir) {
  std::ifstream in(run_dir + "/config.json");
  return nlohmann::json::parse(in)["options"];
}

TEST(ConfigFile, TheFileSetsOptionsAndTheCommandLineWins) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  write(tmp / "run.toml", "# a recipe\n[train]\npreset = \"d2\"\ntrain-data = \"" + (tmp / "train_*.bin") +
                              "\"\nbatch = 3\nseq = 16\nsteps = 5\nlr = 2e-3\nlog-every = 7\nthreads = 1\n"
                              "deterministic = true\n");
  const auto r = run_mptrain("train --config " + (tmp / "run.toml") + " --steps 2 --batch 2 --run-dir " + (tmp / "a"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto o = options_of(tmp / "a");
  EXPECT_EQ(o["steps"], 2) << "the command line's --steps";
  EXPECT_EQ(o["batch"], 2) << "the command line's --batch";
  EXPECT_EQ(o["seq"], 16) << "the file's seq";
  EXPECT_EQ(o["log_every"], 7) << "the file's log-every";
  EXPECT_NEAR(o["lr"].get<double>(), 2e-3, 1e-9) << "the file's lr";
  EXPECT_EQ(o["deterministic"], true) << "the file's flag";
  EXPECT_TRUE(fs::exists(tmp / "a/step_00000002")) << r.output;
}

TEST(ConfigFile, AnUnknownKeyOrAMissingFileIsOneClearError) {
  TempDir tmp;
  write(tmp / "bad.toml", "[train]\nbatch = 2\nbatchsize = 8\n");
  expect_clear_error(run_mptrain("train --config " + (tmp / "bad.toml")),
                     "--config: 'train.batchsize' is not an option");
  write(tmp / "top.toml", "batch = 8\n");  // no [train] table
  expect_clear_error(run_mptrain("train --config " + (tmp / "top.toml")), "--config: 'batch' is not an option");
  expect_clear_error(run_mptrain("train --config " + (tmp / "none.toml")), "--config: ");
  write(tmp / "value.toml", "[train]\nbatch = 0\n");
  expect_clear_error(run_mptrain("train --config " + (tmp / "value.toml")), "--batch: must be at least 1, not 0");
}

// Each recipe's options parse; with its data pointed somewhere empty, the run stops at the data.
TEST(ConfigFile, EveryShippedRecipeParses) {
  int recipes = 0;
  for (const auto& e : fs::directory_iterator(fs::path(MPTRAIN_SOURCE_DIR) / "recipes")) {
    if (e.path().extension() != ".toml") continue;
    ++recipes;
    const auto r = run_mptrain("train --config " + e.path().string() +
                               " --train-data /nonexistent/recipe-data --run-dir /nonexistent/recipe-run");
    EXPECT_NE(r.exit_code, 0) << e.path();
    EXPECT_EQ(r.output.find("--config"), std::string::npos) << e.path() << ": " << r.output;
    EXPECT_NE(r.output.find("/nonexistent/recipe-data"), std::string::npos) << e.path() << ": " << r.output;
  }
  EXPECT_GE(recipes, 3);
}

}  // namespace
}  // namespace mptrain
