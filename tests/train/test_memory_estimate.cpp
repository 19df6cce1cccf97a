// Resource limits:
//  - sizes such as 2G / 512M parse (binary units), malformed ones are errors
//  - the estimate's activations and weight copies are exactly what Gpt2 allocates (fp32 and
//    bf16): the estimate reads the model's own plan, so it cannot drift from it
//  - `mptrain train` refuses a batch that cannot fit under --memory-limit with the estimate,
//    the memory available and the largest batch that fits, and that batch is accepted (and
//    one more is refused); with --total-batch, the suggestion divides it
//  - --threads beyond 4 per core is refused
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/cpu/context.h"
#include "backend/device.h"
#include "common/host_backend.h"
#include "core/error.h"
#include "model/gpt2.h"
#include "train/memory_estimate.h"
#include "train/options.h"
#include "train/train_test_util.h"

namespace mptrain {
namespace {

using testing::expect_clear_error;
using testing::run_mptrain;
using testing::TempDir;

TEST(MemoryEstimate, ParsesSizes) {
  EXPECT_EQ(parse_memory_size("2G", "x"), size_t{2} << 30);
  EXPECT_EQ(parse_memory_size("2GB", "x"), size_t{2} << 30);
  EXPECT_EQ(parse_memory_size("2Gi", "x"), size_t{2} << 30);
  EXPECT_EQ(parse_memory_size("1.5g", "x"), size_t{3} << 29);
  EXPECT_EQ(parse_memory_size("512M", "x"), size_t{512} << 20);
  EXPECT_EQ(parse_memory_size("64k", "x"), size_t{64} << 10);
  EXPECT_EQ(parse_memory_size("1000", "x"), 1000u);
  for (const char* bad : {"", "G", "abc", "-1G", "0", "2X", "2GG", "nan", "inf"}) {
    try {
      parse_memory_size(bad, "--memory-limit");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--memory-limit '" + std::string(bad) + "'"), std::string::npos);
    }
  }
  const MemoryBudget given = available_memory("3G");
  EXPECT_EQ(given.bytes, size_t{3} << 30);
  EXPECT_EQ(given.source, "--memory-limit");
  const MemoryBudget detected = available_memory("");  // Linux: /proc/meminfo at least
  EXPECT_GT(detected.bytes, 0u);
  EXPECT_FALSE(detected.source.empty());
}

void expect_estimate_matches_model(Precision precision) {
  const Gpt2Config config = gpt2_preset("d2", 128);
  TrainOptions o;
  o.batch = 3;
  o.seq = 48;
  const MemoryEstimate e = estimate_training_memory(o, gpt2_footprint(config, precision), 1);
  cpu::Context ctx;
  Gpt2 model(config, cpu_backend(ctx), precision);
  model.plan(o.batch, o.seq);
  EXPECT_EQ(e.params, model.num_params() * sizeof(float));
  EXPECT_EQ(e.grads, model.num_params() * sizeof(float));
  EXPECT_EQ(e.optimizer, 2 * model.num_params() * sizeof(float));
  EXPECT_EQ(e.activations, model.activation_bytes()) << precision_name(precision);
  EXPECT_EQ(e.weight_copies, model.weight_copy_bytes()) << precision_name(precision);
  // Larger batches need more.
  o.batch = 6;
  EXPECT_GT(estimate_training_memory(o, gpt2_footprint(config, precision), 1).activations, e.activations);
}

TEST(MemoryEstimate, ActivationsAndWeightCopiesAreWhatTheModelAllocatesFp32) {
  expect_estimate_matches_model(Precision::Fp32);
}

TEST(MemoryEstimate, ActivationsAndWeightCopiesAreWhatTheModelAllocatesBf16) {
  expect_estimate_matches_model(Precision::Bf16);
}

// What the run allocates at batch B (the estimate less the process, which is this test's here).
size_t to_allocate(int B, int T) {
  TrainOptions o;
  o.seq = T;
  o.batch = B;
  return estimate_training_memory(o, gpt2_footprint(gpt2_preset("d2", 128), Precision::Fp32), 1).to_allocate();
}

std::string train_args(const std::string& data, int B, size_t limit) {
  return "train --preset d2 --train-data '" + data + "/train_*.bin' --seq 64 --steps 1 --threads 2 --quiet "
         "--sample-tokens 1 --batch " + std::to_string(B) + " --memory-limit " + std::to_string(limit) +
         " --run-dir " + data + "/run";
}

TEST(MemoryLimitCli, RefusesABatchThatCannotFitAndNamesTheLargestThatDoes) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  // --memory-limit bounds the whole process: the trainer's resident set where it checks (asked of
  // it with a limit nothing fits) plus what the run allocates, between batches 3 and 4.
  const auto probe = run_mptrain(train_args(tmp.path(), 2, 1 << 20));
  const size_t process = testing::process_in_refusal(probe.output);
  ASSERT_GT(process, 0u) << probe.output;
  const size_t limit = process + (to_allocate(3, 64) + to_allocate(4, 64)) / 2;
  auto r = run_mptrain(train_args(tmp.path(), 8, limit));
  expect_clear_error(r, "batch 8 x 64 needs an estimated ");
  EXPECT_NE(r.output.find("activations "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("is available (--memory-limit)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the largest batch that fits is --batch 3"), std::string::npos) << r.output;
  // That batch really runs; one more does not.
  auto ok = run_mptrain(train_args(tmp.path(), 3, limit));
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  expect_clear_error(run_mptrain(train_args(tmp.path(), 4, limit)), "the largest batch that fits is --batch 3");
  // With --total-batch 512 (8 x 64) the suggestion must divide it: 2, not 3.
  expect_clear_error(run_mptrain(train_args(tmp.path(), 8, limit) + " --total-batch 512"),
                     "the largest batch that fits is --batch 2 (a divisor of --total-batch 512)");
  // Nothing fits.
  expect_clear_error(run_mptrain(train_args(tmp.path(), 2, 1 << 20)), "even --batch 1 does not fit");
}

// `explain`'s "peak resident (measured)" line, in bytes (0 when missing).
size_t explained_peak(const std::string& output) {
  const std::string key = "peak resident (measured)";
  const size_t at = output.find(key);
  if (at == std::string::npos) return 0;
  return static_cast<size_t>(std::stod(output.substr(at + key.size())) * 1024.0 * 1024.0);
}

// The last peak_rss_mb of a run's metrics.jsonl, in bytes.
size_t run_peak(const std::string& run_dir) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::string line;
  double mb = 0.0;
  while (std::getline(in, line)) mb = nlohmann::json::parse(line).value("peak_rss_mb", mb);
  return static_cast<size_t>(mb * 1024.0 * 1024.0);
}

// The estimate holds: a run's peak resident memory is within 10% of what `explain` says for the
// same model, batch, precision and --recompute (the plan's buffers, the runtime allowance and
// explain's own measured process), for a model whose buffers are most of it and one whose process is.
TEST(MemoryEstimate, PeakResidentStaysWithinTenPercentOfExplain) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "under AddressSanitizer the resident set holds its shadow memory and quarantine, "
                  "which no estimate of the run's buffers counts";
#endif
  TempDir tmp;
  testing::write_small_shards(tmp.path(), 40000, 8000);
  struct Case {
    const char* preset;
    int batch, seq;
    const char* precision;
    const char* recompute;
  };
  for (const Case c : {Case{"d6", 4, 256, "fp32", "none"}, Case{"d6", 4, 256, "bf16", "none"},
                       Case{"d6", 4, 256, "bf16", "block"}, Case{"d6", 4, 256, "fp32", "norm,mlp"},
                       Case{"d2", 1, 8, "fp32", "none"}}) {
    const std::string shape = std::string("--preset ") + c.preset + " --batch " + std::to_string(c.batch) +
                              " --seq " + std::to_string(c.seq) + " --precision " + c.precision + " --recompute " +
                              c.recompute;
    const testing::RunResult e = run_mptrain("explain " + shape);
    ASSERT_EQ(e.exit_code, 0) << e.output;
    const size_t estimate = explained_peak(e.output);
    ASSERT_GT(estimate, 0u) << e.output;
    const std::string run = tmp / (std::string(c.preset) + c.precision + c.recompute);
    const testing::RunResult r = run_mptrain("train " + shape + " --train-data '" + tmp.path() +
                                    "/train_*.bin' --steps 2 --log-every 1 --threads 2 --quiet --sample-tokens 1 "
                                    "--run-dir " + run);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const double ratio = static_cast<double>(run_peak(run)) / static_cast<double>(estimate);
    EXPECT_NEAR(ratio, 1.0, 0.10) << shape << ": peak RSS " << run_peak(run) << " bytes against explain's "
                                  << estimate << "\n" << e.output;
  }
}

// --recompute: an unknown name is one error where the command line is read; the families that
// keep every activation so far refuse a set in one line; explain lists every choice.
TEST(RecomputeCli, BadNamesAndOtherFamiliesAreRefusedInOneLine) {
  TempDir tmp;
  const std::string data = testing::write_small_shards(tmp.path());
  expect_clear_error(run_mptrain("train --preset d2 --train-data '" + data + "' --recompute swiglu"),
                     "unknown --recompute choice 'swiglu' (expected gelu, norm, attention, mlp or block)");
  expect_clear_error(run_mptrain("train --model llama --preset llama-tiny --train-data '" + data +
                                 "' --steps 1 --recompute gelu,mlp --run-dir " + (tmp / "llama")),
                     "--recompute gelu,mlp: Llama's MLP activation is not GELU");
  expect_clear_error(run_mptrain("explain --preset bert-tiny --recompute block"),
                     "--recompute block: BERT's LayerNorm outputs are its residual stream (post-LN)");
  const auto b = run_mptrain("explain --preset bert-tiny --recompute mlp");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  for (const char* row : {"  none ", "  gelu ", "  mlp "})
    EXPECT_NE(b.output.find(row), std::string::npos) << row << "\n" << b.output;
  // Llama's choices: no gelu row.
  const auto l = run_mptrain("explain --preset llama-tiny --recompute mlp");
  ASSERT_EQ(l.exit_code, 0) << l.output;
  for (const char* row : {"  none ", "  norm ", "  mlp ", "  block "})
    EXPECT_NE(l.output.find(row), std::string::npos) << row << "\n" << l.output;
  EXPECT_EQ(l.output.find("  gelu "), std::string::npos) << l.output;
  const auto e = run_mptrain("explain --preset d2 --recompute norm,mlp");
  ASSERT_EQ(e.exit_code, 0) << e.output;
  for (const char* row :
       {"  none ", "  gelu ", "  norm ", "  attention ", "  mlp ", "  block ", "  norm,mlp "})
    EXPECT_NE(e.output.find(row), std::string::npos) << row << "\n" << e.output;
  EXPECT_NE(e.output.find("<- this plan"), std::string::npos) << e.output;
}

// --batch auto's search (against memory free beside the process: what the run allocates): the
// largest micro-batch dividing --total-batch's sequences that fits, and the cheapest recompute
// set that reaches it.
TEST(BatchAuto, TheLargestBatchThatFitsWithTheCheapestRecomputeThatReachesIt) {
  const std::vector<RecomputeSet> choices = {RecomputeSet{}, parse_recompute("mlp"), parse_recompute("block")};
  const auto footprint_of = [](RecomputeSet s) {
    Gpt2Config c = gpt2_preset("d6", 128);
    c.recompute = s;
    return gpt2_footprint(c, Precision::Fp32);
  };
  TrainOptions o;
  o.seq = 256;
  o.total_batch_tokens = 16 * 256;  // batches 16, 8, 4, 2, 1 divide it
  const auto allocates = [&](int B, RecomputeSet s) {
    TrainOptions t = o;
    t.batch = B;
    return estimate_training_memory(t, footprint_of(s), 1).to_allocate();
  };
  const auto choose = [&](size_t budget) {
    return choose_batch(o, choices, footprint_of, 1, MemoryBudget{budget, "a test's budget", false});
  };
  // Room for 16 keeping everything: nothing recomputed.
  BatchChoice c = choose(allocates(16, {}) + 1);
  EXPECT_EQ(c.batch, 16);
  EXPECT_TRUE(c.recompute.none());
  EXPECT_EQ(c.without, 16);
  // Room for 8 only with block: block, and without it 4 (4 fits keeping everything, 8 does not).
  ASSERT_LT(allocates(8, parse_recompute("block")), allocates(8, parse_recompute("mlp")));
  ASSERT_LT(allocates(4, {}), allocates(8, parse_recompute("block")));
  c = choose(allocates(8, parse_recompute("block")) + 1);
  EXPECT_EQ(c.batch, 8);
  EXPECT_EQ(recompute_name(c.recompute), "block");
  EXPECT_EQ(c.without, 4);
  // Room for 8 under mlp: mlp, the cheaper of the two that reach it.
  c = choose(allocates(8, parse_recompute("mlp")) + 1);
  EXPECT_EQ(c.batch, 8);
  EXPECT_EQ(recompute_name(c.recompute), "mlp");
  // Nothing fits: one line with what the smallest run needs.
  try {
    choose(1024);
    ADD_FAILURE() << "a 1 KiB budget fitted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--batch auto: even batch 1 x 256 with --recompute block needs an estimated"),
              std::string::npos)
        << e.what();
  }
  // --batch auto needs --total-batch to split.
  o.total_batch_tokens = 0;
  EXPECT_THROW(choose(size_t{1} << 40), Error);
}

// The trainer's --batch auto: one line saying what it chose, the run trains at that batch, and
// config.json records the batch, the recompute set and that they were chosen.
TEST(BatchAuto, TheTrainerSaysWhatItChoseAndConfigJsonRecordsIt) {
  TempDir tmp;
  const std::string data = testing::write_small_shards(tmp.path());
  const std::string run = tmp / "run";
  const auto r = run_mptrain("train --preset d2 --train-data '" + data + "' --seq 64 --batch auto --total-batch 512 "
                             "--steps 2 --threads 2 --sample-tokens 1 --run-dir " + run);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("batch auto: micro-batch 8 with --recompute none, the largest dividing --total-batch's 8 "
                          "sequences per rank that fits"),
            std::string::npos)
      << r.output;
  std::ifstream in(run + "/config.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  const nlohmann::json& opts = j.contains("options") ? j["options"] : j;
  EXPECT_EQ(opts.value("batch", 0), 8) << j.dump();
  EXPECT_EQ(opts.value("batch_auto", false), true) << j.dump();
  EXPECT_EQ(opts.value("recompute", std::string()), "none") << j.dump();
  expect_clear_error(run_mptrain("train --preset d2 --train-data '" + data + "' --batch auto --steps 1 --run-dir " +
                                 (tmp / "r2")),
                     "--batch auto splits --total-batch into micro-batches");
  expect_clear_error(run_mptrain("train --preset d2 --train-data '" + data + "' --batch many --steps 1"),
                     "--batch: expected a number of sequences or auto, not 'many'");
}

// explain --batch auto chooses as the trainer does, says it in the trainer's line and explains
// that plan; a GPU's plan needs --memory-limit.
TEST(BatchAuto, ExplainChoosesAsTheTrainerDoes) {
  const auto e = run_mptrain("explain --preset d2 --seq 64 --batch auto --total-batch 512 --memory-limit 4G");
  ASSERT_EQ(e.exit_code, 0) << e.output;
  EXPECT_NE(e.output.find("batch auto: micro-batch 8 with --recompute none, the largest dividing --total-batch's 8 "
                          "sequences per rank that fits 4.00 GiB (--memory-limit)"),
            std::string::npos)
      << e.output;
  EXPECT_NE(e.output.find("batch 8 x seq 64"), std::string::npos) << e.output;
  if (cuda_compiled())  // a GPU's plan needs the CUDA backend's answers, built in or not
    expect_clear_error(run_mptrain("explain --preset d2 --batch auto --total-batch 512 --device cuda"),
                       "--batch auto --device cuda: give --memory-limit");
}

TEST(MemoryLimitCli, ThreadsAreBounded) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  expect_clear_error(run_mptrain("train --preset d2 --train-data '" + tmp.path() + "/train_*.bin' --seq 64 --steps 1 "
                                 "--threads 100000 --run-dir " + (tmp / "run")),
                     "--threads 100000 is more than 4 per core");
}

}  // namespace
}  // namespace mptrain
