// BERT in the shared loop's precisions and with Sophia (model/bert_pass.cpp in every precision and
// forward_backward_sampled, plugged in through train/bert_task.h), and the memory refusal:
//  - bf16 and fp16 train a few steps on a tiny model; fp16 shows its loss scale and skipped
//    steps in the log and metrics (an injected inf gradient is skipped and halves the scale);
//    the precision is recorded and a resume keeps it
//  - --optimizer sophia runs and logs the win rate on its Hessian steps
//  - the memory estimate is what Bert allocates, and --memory-limit refuses a batch that cannot
//    fit, naming the largest that does (which then runs)
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "backend/cpu/context.h"
#include "data/bert_instances.h"
#include "io/checkpoint_dir.h"
#include "io/fileutil.h"
#include "model/bert.h"
#include "train/bert_task.h"
#include "train/memory_estimate.h"
#include "train/options.h"
#include "train/train_test_util.h"
#include "common/host_backend.h"

namespace mptrain {
namespace {

using testing::expect_clear_error;
using testing::run_mptrain;
using testing::TempDir;

std::vector<nlohmann::json> metrics(const std::string& run) {
  std::ifstream in(run + "/metrics.jsonl");
  std::vector<nlohmann::json> out;
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
  return out;
}

class BertPrecision : public testing::BertDataSuite {
 protected:
  // bert-tiny sized to the instance file's vocabulary, as the trainer builds it.
  static BertConfig tiny_config() {
    const BertInstanceFile file(data());
    BertConfig c = bert_preset("bert-tiny", static_cast<int>(file.header().vocab_size));
    c.pad_token_id = file.header().pad_id;
    return c;
  }
  static std::string args(const std::string& run, int steps, const std::string& extra, int batch = 8) {
    return "train --model bert --preset bert-tiny --data " + data() + " --batch " + std::to_string(batch) +
           " --lr 3e-3 --warmup 2 --max-predictions 5 --seed 7 --threads 2 --deterministic"
           " --progress lines --log-every 1 --steps " + std::to_string(steps) + " --run-dir " + run_dir(run) + " " +
           extra;
  }
};

TEST_F(BertPrecision, Bf16TrainsAndRecordsItsPrecision) {
  auto r = run_mptrain(args("bf16", 4, "--precision bf16"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("precision bf16"), std::string::npos) << r.output;
  const auto m = metrics(run_dir("bf16"));
  ASSERT_EQ(m.size(), 4u);
  for (const auto& j : m) {
    EXPECT_TRUE(std::isfinite(j["train_loss"].get<double>())) << j.dump();
    EXPECT_TRUE(j.contains("mlm_loss")) << j.dump();
  }
  const auto state = nlohmann::json::parse(read_file(resolve_checkpoint(run_dir("bf16")) + "/state.json"));
  EXPECT_EQ(state["precision"], "bf16");
  EXPECT_EQ(state["model"], "bert");
  // A resume keeps the checkpoint's precision.
  auto resumed = run_mptrain(args("bf16", 6, "--resume " + run_dir("bf16")));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("precision bf16"), std::string::npos) << resumed.output;
}

TEST_F(BertPrecision, Fp16ShowsTheLossScaleAndSkipsAnOverflow) {
  auto r = run_mptrain(args("fp16", 4, "--precision fp16 --fault-inf-grad 2"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("precision fp16: dynamic loss scaling, scale 65536"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("| scale 65536 skipped 0"), std::string::npos) << r.output;  // step 1
  EXPECT_NE(r.output.find("| scale 65536 skipped 1"), std::string::npos) << r.output;  // step 2: the injected inf
  EXPECT_NE(r.output.find("| scale 32768 skipped 1"), std::string::npos) << r.output;  // then halved
  const auto m = metrics(run_dir("fp16"));
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[1]["skipped"], true);
  EXPECT_EQ(m[2]["skipped"], false);
  EXPECT_EQ(m[3]["skipped_steps"], 1);
  EXPECT_DOUBLE_EQ(m[3]["loss_scale"].get<double>(), 32768.0);
  const auto state = nlohmann::json::parse(read_file(resolve_checkpoint(run_dir("fp16")) + "/state.json"));
  EXPECT_EQ(state["precision"], "fp16");
  EXPECT_EQ(state["loss_scaler"]["skipped_steps"], 1);
}

TEST_F(BertPrecision, SophiaRunsAndLogsTheWinRate) {
  auto r = run_mptrain(args("sophia", 4, "--optimizer sophia --sophia-k 2"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("optimizer sophia:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("| win rate "), std::string::npos) << r.output;
  const auto m = metrics(run_dir("sophia"));
  ASSERT_EQ(m.size(), 4u);
  for (int i : {1, 3}) {  // steps 2 and 4: Hessian estimates
    ASSERT_TRUE(m[i].contains("win_rate")) << m[i].dump();
    EXPECT_GE(m[i]["win_rate"].get<double>(), 0.0);
    EXPECT_LE(m[i]["win_rate"].get<double>(), 1.0);
    EXPECT_TRUE(std::isfinite(m[i]["hessian_loss"].get<double>()));
  }
  EXPECT_FALSE(m[0].contains("win_rate"));
  EXPECT_TRUE(std::isfinite(m[3]["train_loss"].get<double>()));
}

TEST_F(BertPrecision, MemoryEstimateIsWhatBertAllocates) {
  const BertConfig config = tiny_config();
  for (Precision p : {Precision::Fp32, Precision::Bf16, Precision::Fp16}) {
    TrainOptions o;
    o.batch = 3;
    o.seq = 32;
    const MemoryEstimate e = estimate_training_memory(o, bert_footprint(config, p, 5), 1);
    cpu::Context ctx;
    Bert model(config, cpu_backend(ctx), p);
    model.plan(o.batch, o.seq, o.batch * 5);
    EXPECT_EQ(e.params, model.num_params() * sizeof(float)) << precision_name(p);
    EXPECT_EQ(e.activations, model.activation_bytes()) << precision_name(p);
    EXPECT_EQ(e.weight_copies, model.weight_copy_bytes()) << precision_name(p);
  }
}

TEST_F(BertPrecision, MemoryLimitRefusesABatchAndNamesTheLargestThatFits) {
  const ModelFootprint f = bert_footprint(tiny_config(), Precision::Fp32, 5);
  TrainOptions o;
  o.seq = 32;
  o.batch = 3;
  const size_t lo = estimate_training_memory(o, f, 1).to_allocate();
  o.batch = 4;
  const size_t hi = estimate_training_memory(o, f, 1).to_allocate();
  // The search, against memory free beside the process (what the run allocates): batches 3 and 4
  // differ by less than the process's resident set varies from run to run (~0.4 MiB), so the
  // exact boundary is checked here, where the process does not count.
  o.batch = 16;
  try {
    check_memory_fits(o, f, 1, MemoryBudget{(lo + hi) / 2, "a test's budget", false});
    ADD_FAILURE() << "batch 16 fitted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the largest batch that fits is --batch 3"), std::string::npos) << e.what();
  }
  // The trainer under --memory-limit (the whole process: its own resident set where it checks,
  // asked of it with a limit nothing fits, plus what the run allocates): batch 16 refused, 3 runs.
  const size_t process = testing::process_in_refusal(run_mptrain(args("mem", 1, "--memory-limit 1M --quiet", 16)).output);
  ASSERT_GT(process, 0u);
  const std::string limit = std::to_string(process + hi + (size_t{2} << 20));
  auto r = run_mptrain(args("mem", 1, "--memory-limit " + limit + " --quiet", 16));
  expect_clear_error(r, "batch 16 x 32 needs an estimated ");
  EXPECT_NE(r.output.find("the largest batch that fits is --batch "), std::string::npos) << r.output;
  auto ok = run_mptrain(args("mem", 1, "--memory-limit " + limit + " --quiet", 3));
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
}

}  // namespace
}  // namespace mptrain
