// Training curves in bf16 and fp16 against fp32 on real text: `mptrain prepare` on the
// `fortunes` file of Debian's fortunes corpus (the default corpus's smallest part, ~6K GPT-2
// tokens, as tests/train/test_end_to_end.cpp), then the same tiny run (d2, batch 4 x 64,
// 120 steps, lr 3e-3, same seed and data order: ~30 s of CPU per precision, most of it d2's
// 50K-row LM head; the loss falls from 10.8 to ~4.8) in fp32, bf16 and fp16. Stated tolerances:
//   - no NaN or infinite loss in any precision;
//   - final smoothed loss (mean of the last 20 steps) within kFinalTolerance (relative) of fp32's;
//   - every step's |loss - fp32 loss| <= kStepTolerance nats (the curves track each other
//     step by step, not only at the end);
//   - fp16: at most kMaxSkipped steps skipped by the loss scaler.
// The measured values are recorded as test properties (ctest --output-junit shows them) and
// printed. Measured (2026-11-22): bf16 final 4.7950 vs fp32 4.7954 (0.007%), max |dloss| 0.027;
// fp16 0.002%, max |dloss| 0.0007, 0 skipped. The lr matters: at 1e-2 this tiny model is
// chaotic -- fp32 itself spikes to loss 12.5 with grad norms near 80 -- and any perturbation,
// a rounding or a different thread split, sends the curves apart by several nats for a few
// steps; the bound below would then test the chaos, not the precision.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "train/train_test_util.h"

namespace mptrain {
namespace {

namespace fs = std::filesystem;
using testing::run_mptrain;
using testing::TempDir;

constexpr const char* kCorpus = "/usr/share/games/fortunes/fortunes";
constexpr int kSteps = 120;
constexpr double kFinalTolerance = 0.02;
constexpr double kStepTolerance = 0.15;
constexpr int kMaxSkipped = 3;

std::string vocab_dir() { return testing::gpt2_vocab_dir(); }

struct Curve {
  std::vector<double> loss;
  int64_t skipped = 0;
};

Curve read_curve(const std::string& run_dir) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  Curve c;
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    // A NaN loss is written as null: keep it visible as NaN.
    c.loss.push_back(j["train_loss"].is_null() ? std::nan("") : j["train_loss"].get<double>());
    if (j.contains("skipped_steps")) c.skipped = j["skipped_steps"].get<int64_t>();
  }
  return c;
}

double tail_mean(const std::vector<double>& v, size_t n) {
  double s = 0.0;
  for (size_t i = v.size() - n; i < v.size(); ++i) s += v[i] / static_cast<double>(n);
  return s;
}

TEST(PrecisionCurves, Bf16AndFp16TrackFp32OnFortunes) {
  if (!fs::exists(kCorpus)) GTEST_SKIP() << kCorpus << " missing (scripts/setup.sh installs Debian's fortunes)";
  if (!fs::exists(vocab_dir() + "/encoder.json")) GTEST_SKIP() << "GPT-2 vocabulary missing (scripts/setup.sh)";
  TempDir tmp;
  auto prep = run_mptrain("prepare " + std::string(kCorpus) +
                          " --doc-delimiter '%' --val-fraction 0.05 --name fortunes --progress none --out " +
                          (tmp / "data") + " --vocab-dir " + vocab_dir());
  ASSERT_EQ(prep.exit_code, 0) << prep.output;
  const std::string train = "train --preset d2 --train-data '" + (tmp / "data/fortunes_train_*.bin") +
                            "' --batch 4 --seq 64 --steps " + std::to_string(kSteps) +
                            " --lr 3e-3 --warmup 10 --sample-tokens 4 --log-every 50 --threads 2 --deterministic"
                            " --seed 7 --progress none";
  std::map<std::string, Curve> curves;
  for (const char* p : {"fp32", "bf16", "fp16"}) {
    auto r = run_mptrain(train + " --precision " + p + " --run-dir " + (tmp / p));
    ASSERT_EQ(r.exit_code, 0) << p << "\n" << r.output;
    curves[p] = read_curve(tmp / p);
    ASSERT_EQ(curves[p].loss.size(), static_cast<size_t>(kSteps)) << p;
    for (size_t i = 0; i < curves[p].loss.size(); ++i)
      ASSERT_TRUE(std::isfinite(curves[p].loss[i])) << p << " step " << i + 1;
  }
  const Curve& ref = curves["fp32"];
  const double ref_final = tail_mean(ref.loss, 20);
  RecordProperty("fp32_final_loss", std::to_string(ref_final));
  for (const char* p : {"bf16", "fp16"}) {
    const Curve& c = curves[p];
    double max_step_diff = 0.0;
    size_t worst = 0;
    for (size_t i = 0; i < c.loss.size(); ++i) {
      const double d = std::fabs(c.loss[i] - ref.loss[i]);
      if (d > max_step_diff) max_step_diff = d, worst = i + 1;
    }
    const double final_loss = tail_mean(c.loss, 20);
    const double rel = std::fabs(final_loss - ref_final) / ref_final;
    RecordProperty(std::string(p) + "_final_loss", std::to_string(final_loss));
    RecordProperty(std::string(p) + "_final_rel_diff", std::to_string(rel));
    RecordProperty(std::string(p) + "_max_step_abs_diff", std::to_string(max_step_diff));
    std::printf("%s: final smoothed loss %.4f vs fp32 %.4f (%.2f%%), max |dloss| %.4f at step %zu, skipped %lld\n", p,
                final_loss, ref_final, rel * 100.0, max_step_diff, worst, (long long)c.skipped);
    EXPECT_LE(rel, kFinalTolerance) << p;
    EXPECT_LE(max_step_diff, kStepTolerance) << p << " step " << worst;
  }
  EXPECT_LE(curves["fp16"].skipped, kMaxSkipped);
  // The run learned (the comparison would be vacuous on a flat curve).
  EXPECT_LT(ref_final, ref.loss.front() - 2.0);
}

}  // namespace
}  // namespace mptrain
