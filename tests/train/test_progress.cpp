// What a user sees while a run goes: under a pseudo-terminal (util-linux `script`) the bar
// redraws in place (carriage returns and ESC[K erases); piped, plain lines every
// --log-every steps and no control characters; --quiet prints the final summary only.
// Also the pieces behind it: the Progress display on a stream, the CPU peak estimate
// behind MFU, metrics records, and the run dir's command line and resume command.
#include <gtest/gtest.h>
#include <omp.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backend/cpu/amx_gemm.h"
#include "core/error.h"
#include "core/progress.h"
#include "train/metrics.h"
#include "train/peak_flops.h"
#include "train/run_files.h"
#include "train/train_test_util.h"

namespace mptrain {
namespace {

using testing::run_command;
using testing::run_mptrain;
using testing::TempDir;

std::string train_args(const TempDir& tmp, const std::string& run, int steps, const std::string& extra = "") {
  return "train --preset d2 --train-data '" + (tmp / "train_*.bin") + "' --batch 2 --seq 16 --steps " +
         std::to_string(steps) + " --sample-tokens 4 --threads 2 --run-dir " + (tmp / run) + " " + extra;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(ProgressDisplay, UnderAPseudoTerminalTheBarRedrawsInPlace) {
  if (run_command("command -v script >/dev/null").exit_code != 0)
    GTEST_SKIP() << "script (util-linux) missing";
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  const std::string cmd = std::string(MPTRAIN_BINARY) + " " + train_args(tmp, "run", 12, "--log-every 5");
  // script runs the command on a new pseudo-terminal; -e returns its exit status.
  auto r = run_command("script -qfec \"" + cmd + "\" /dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The bar: drawn after a carriage return, erased to the end of the line, several times.
  EXPECT_GE(count(r.output, "\rtrain ["), 3u) << r.output;
  EXPECT_GE(count(r.output, "\033[K"), 3u) << r.output;
  EXPECT_NE(r.output.find("ETA"), std::string::npos);
  EXPECT_NE(r.output.find("MFU"), std::string::npos);
  // Log lines still appear every --log-every steps, above the bar.
  EXPECT_NE(r.output.find("step      5/12 |"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("step     10/12 |"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("done: 12/12 steps"), std::string::npos) << r.output;
}

TEST(ProgressDisplay, PipedItPrintsPlainLinesEveryLogEverySteps) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  auto r = run_mptrain(train_args(tmp, "run", 12, "--log-every 4"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find('\r'), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('\033'), std::string::npos) << r.output;
  for (const char* s : {"step      1/12 |", "step      4/12 |", "step      8/12 |", "step     12/12 |"})
    EXPECT_NE(r.output.find(s), std::string::npos) << s << "\n" << r.output;
  for (const char* s : {"step      2/12 |", "step      5/12 |", "step     11/12 |"})
    EXPECT_EQ(r.output.find(s), std::string::npos) << s << "\n" << r.output;
  EXPECT_NE(r.output.find("MFU"), std::string::npos);
  EXPECT_NE(r.output.find("ETA"), std::string::npos);
  // metrics.jsonl holds every step regardless of --log-every.
  EXPECT_EQ(testing::read_losses(tmp / "run").size(), 12u);
}

TEST(ProgressDisplay, QuietPrintsOnlyTheFinalSummary) {
  TempDir tmp;
  testing::write_small_shards(tmp.path());
  auto r = run_mptrain(train_args(tmp, "run", 3, "--quiet"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(count(r.output, "\n"), 2u) << r.output;  // "done: ..." and "checkpoint: ..."
  EXPECT_EQ(r.output.rfind("done: 3/3 steps", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("checkpoint: "), std::string::npos) << r.output;
}

// Progress on a stream of our own: bar mode writes \r…ESC[K and print() clears the bar.
TEST(ProgressDisplay, BarAndLinesOnAStream) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  ASSERT_NE(f, nullptr);
  {
    Progress p({.label = "work", .total = 10, .mode = ProgressMode::kBar, .out = f});
    EXPECT_EQ(p.mode(), ProgressMode::kBar);
    p.draw(1, "one");
    p.print("a message");
    p.draw(2, "two", /*force=*/true);
  }  // the destructor clears the bar
  std::fclose(f);
  std::string out(buf, len);
  std::free(buf);
  EXPECT_EQ(out.rfind("\rwork [", 0), 0u) << out;
  EXPECT_NE(out.find("one"), std::string::npos);
  EXPECT_NE(out.find("\r\033[Ka message\n"), std::string::npos) << out;
  EXPECT_NE(out.find(" 20% two"), std::string::npos) << out;
  EXPECT_EQ(out.substr(out.size() - 4), "\r\033[K");

  // kAuto on a stream that is not a terminal: lines, at most one per line_seconds.
  f = open_memstream(&buf, &len);
  {
    Progress p({.label = "work", .total = 4, .mode = ProgressMode::kAuto, .out = f, .line_seconds = 3600});
    EXPECT_EQ(p.mode(), ProgressMode::kLines);
    p.draw(1, "x");  // too soon after the start: nothing
    p.draw(4, "done", /*force=*/true);
  }
  std::fclose(f);
  out.assign(buf, len);
  std::free(buf);
  EXPECT_EQ(out, "work: 100% | done | ETA 0:00\n");
  EXPECT_EQ(format_duration(42), "0:42");
  EXPECT_EQ(format_duration(3725), "1:02:05");
  EXPECT_EQ(format_si(12345), "12.3k");
  EXPECT_THROW(parse_progress_mode("fancy"), Error);
}

TEST(PeakFlops, FormulaFromCpuinfo) {
  const std::string two_cores_ht =  // two cores with two hardware threads each, AVX-512, no cpufreq
      "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel name\t: Intel(R) Xeon(R) CPU @ "
      "2.00GHz\n"
      "cpu MHz\t\t: 2000.000\nphysical id\t: 0\ncore id\t\t: 0\nflags\t\t: fpu sse2 avx avx2 fma avx512f\n\n"
      "processor\t: 1\nvendor_id\t: GenuineIntel\ncpu family\t: 6\ncpu MHz\t\t: 2000.000\nphysical id\t: 0\n"
      "core id\t\t: 0\nflags\t\t: fpu sse2 avx avx2 fma avx512f\n\n"
      "processor\t: 2\nvendor_id\t: GenuineIntel\ncpu family\t: 6\ncpu MHz\t\t: 2000.000\nphysical id\t: 0\n"
      "core id\t\t: 1\nflags\t\t: fpu sse2 avx avx2 fma avx512f\n\n"
      "processor\t: 3\nvendor_id\t: GenuineIntel\ncpu family\t: 6\ncpu MHz\t\t: 2000.000\nphysical id\t: 0\n"
      "core id\t\t: 1\nflags\t\t: fpu sse2 avx avx2 fma avx512f\n\n";
  // 4 threads on 2 physical cores count as 2: 2 x 2.0 GHz x 64 = 0.256 TFLOP/s.
  PeakFlops p = estimate_cpu_peak(two_cores_ht, 0, 4);
  EXPECT_NEAR(p.tflops, 0.256, 1e-9) << p.formula;
  EXPECT_NE(p.formula.find("2 cores"), std::string::npos) << p.formula;
  EXPECT_NEAR(estimate_cpu_peak(two_cores_ht, 0, 1).tflops, 0.128, 1e-9);
  // cpufreq's maximum wins over "cpu MHz".
  EXPECT_NEAR(estimate_cpu_peak(two_cores_ht, 3000000, 1).tflops, 0.192, 1e-9);
  // AVX2 + FMA: 32 FLOP/cycle; Zen 4's AVX-512 runs on 256-bit datapaths: 32 as well.
  std::string avx2 = two_cores_ht;
  for (size_t q; (q = avx2.find(" avx512f")) != std::string::npos;) avx2.erase(q, 8);
  EXPECT_NEAR(estimate_cpu_peak(avx2, 0, 1).tflops, 0.064, 1e-9);
  std::string zen4 = two_cores_ht;
  for (size_t q; (q = zen4.find("GenuineIntel")) != std::string::npos;) zen4.replace(q, 12, "AuthenticAMD");
  for (size_t q; (q = zen4.find("cpu family\t: 6\n")) != std::string::npos;)
    zen4.replace(q, 15, "cpu family\t: 25\n");
  EXPECT_NEAR(estimate_cpu_peak(zen4, 0, 1).tflops, 0.064, 1e-9);
  EXPECT_EQ(estimate_cpu_peak("", 0, 4).tflops, 0.0);
  // A measured clock wins over every reported one.
  EXPECT_NEAR(estimate_cpu_peak(two_cores_ht, 3000000, 1, 3.5).tflops, 0.224, 1e-9);
  EXPECT_NE(estimate_cpu_peak(two_cores_ht, 3000000, 1, 3.5).formula.find("measured"), std::string::npos);
  // ... unless it is impossible (a chain the core ran faster than one add per cycle): then the
  // reported clock (cpufreq max here) stands.
  EXPECT_NEAR(estimate_cpu_peak(two_cores_ht, 3000000, 1, 10.92).tflops, 0.192, 1e-9);
  EXPECT_NE(estimate_cpu_peak(two_cores_ht, 3000000, 1, 10.92).formula.find("cpufreq max"),
            std::string::npos);
  // bf16: the fp32 rate without bf16 units, twice it with AVX512-BF16, 1024 FLOP/cycle with AMX.
  EXPECT_NEAR(estimate_cpu_peak(two_cores_ht, 0, 1, 0.0, Precision::Bf16).tflops, 0.128, 1e-9);
  std::string bf16 = two_cores_ht;
  for (size_t q = 0; (q = bf16.find(" avx512f\n", q)) != std::string::npos; q += 20)
    bf16.replace(q, 9, " avx512f avx512_bf16\n");
  EXPECT_NEAR(estimate_cpu_peak(bf16, 0, 1, 0.0, Precision::Bf16).tflops, 0.256, 1e-9);
  EXPECT_NEAR(estimate_cpu_peak(bf16, 0, 1, 0.0, Precision::Fp32).tflops, 0.128, 1e-9);
  EXPECT_NEAR(estimate_cpu_peak(bf16, 0, 1, 0.0, Precision::Fp16).tflops, 0.128, 1e-9);
  std::string amx = bf16;
  for (size_t q = 0; (q = amx.find(" avx512_bf16\n", q)) != std::string::npos; q += 20)
    amx.replace(q, 13, " avx512_bf16 amx_bf16\n");
  EXPECT_NEAR(estimate_cpu_peak(amx, 0, 2, 0.0, Precision::Bf16).tflops, 2 * 2.0 * 1024 / 1000, 1e-9);
  EXPECT_NE(estimate_cpu_peak(amx, 0, 2, 0.0, Precision::Bf16).formula.find("bf16: 2 cores"),
            std::string::npos);
  // --peak-tflops overrides.
  EXPECT_EQ(cpu_peak_flops(2, 1.5).tflops, 1.5);
  EXPECT_EQ(cpu_peak_flops(2, 1.5, Precision::Bf16).tflops, 1.5);
  EXPECT_NEAR(mfu(0.75e12, cpu_peak_flops(2, 1.5)), 0.5, 1e-12);
}

TEST(PeakFlops, MeasuredClockIsPlausible) {
#if defined(__x86_64__)
  // Every x86-64 server core of the last decade runs between 1 and 6 GHz; the bounds leave room
  // for a loaded machine (the best of five runs must be preempted for the figure to fall) and
  // catch a chain the compiler removed (absurdly high) or a broken timer (0).
  const double ghz = measure_core_clock_ghz();
  EXPECT_GT(ghz, 0.5);
  EXPECT_LT(ghz, 7.0);
#else
  EXPECT_EQ(measure_core_clock_ghz(), 0.0);
#endif
}

TEST(PeakFlops, MeasuredFmaPeakIsWithinTheEstimate) {
#if defined(__AVX2__) && defined(__FMA__)
  // Ten chains that start alike were once merged by the compiler into one, which read 1.1-1.2x
  // the estimate; the cores cannot beat cores x clock x FLOP/cycle, so the measurement stays
  // under it (the 10% allow for the clock's own measurement), and above a twentieth of it even on
  // a loaded machine.
  const int threads = omp_get_max_threads();
  const PeakFlops estimate = cpu_peak_flops(threads, 0.0, Precision::Fp32);
  const double measured = measure_fma_peak_tflops(Precision::Fp32);
  EXPECT_GT(measured, 0.05 * estimate.tflops) << estimate.formula;
  EXPECT_LT(measured, 1.1 * estimate.tflops) << estimate.formula;
  const double measured_bf16 = measure_fma_peak_tflops(Precision::Bf16);
  if (cpu::amx_available()) {
    // The tiles' rate: above the FMA units', under the estimate's 1,024 FLOP a cycle a core (the
    // host of 2026-12-07 gave 2.2 of 5.2 TFLOP/s: its two vCPUs' tiles do not add up).
    EXPECT_GT(measured_bf16, measured);
    const PeakFlops tiles = cpu_peak_flops(threads, 0.0, Precision::Bf16);
    EXPECT_LT(measured_bf16, 1.1 * tiles.tflops) << tiles.formula;
  }
#if defined(__AVX512BF16__)
  // vdpbf16ps, two products a lane, sustains more FLOP/s than vfmadd wherever it exists (Zen 5:
  // 2x with 16 chains, 1.6x with the 10 that once hid its latency).
  EXPECT_GT(measured_bf16, measured);
#endif
#else
  GTEST_SKIP() << "this build has no AVX2 FMA";
#endif
}

TEST(Metrics, RecordsAreJsonInFieldOrderAndNonFiniteIsNull) {
  MetricsRecord r;
  r.add("step", int64_t{3}).add("train_loss", 2.5f).add("loss_scale", 65536.0).add("skipped", true);
  r.add("val_loss", std::nan("")).add_string("note", "a \"b\"");
  r.set("train_loss", 1.25);
  EXPECT_EQ(r.to_json_line(),
            "{\"step\":3,\"train_loss\":1.25,\"loss_scale\":65536,\"skipped\":true,\"val_loss\":null,"
            "\"note\":\"a \\\"b\\\"\"}");
  EXPECT_NO_THROW(nlohmann::json::parse(r.to_json_line()));
  EXPECT_GT(peak_rss_bytes(), 1u << 20);

  TempDir tmp;
  {
    MetricsWriter w(tmp.path());
    for (int s = 1; s <= 5; ++s) w.write(MetricsRecord().add("step", int64_t{s}));
  }
  std::ofstream(tmp / "metrics.jsonl", std::ios::app) << "{\"step\":6,\"tr";  // torn by a kill
  trim_metrics(tmp.path(), 3);
  std::ifstream in(tmp / "metrics.jsonl");
  std::stringstream all;
  all << in.rdbuf();
  EXPECT_EQ(all.str(), "{\"step\":1}\n{\"step\":2}\n{\"step\":3}\n");
}

TEST(RunFiles, CommandLineQuotingAndResumeCommand) {
  EXPECT_EQ(shell_quote("plain-arg_1.0"), "plain-arg_1.0");
  EXPECT_EQ(shell_quote("data/*.bin"), "'data/*.bin'");
  EXPECT_EQ(shell_quote("it's"), "'it'\"'\"'s'");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(resume_command({"mptrain", "train", "--resume", "old", "--steps", "9", "--resume=x"}, "runs/a b"),
            "mptrain train --steps 9 --resume 'runs/a b'");
  const auto args = process_arguments();
  ASSERT_FALSE(args.empty());
  EXPECT_NE(args[0].find("mptrain_tests_train"), std::string::npos) << args[0];
  // The quoted command line runs in a shell as the same arguments.
  auto echo = run_command("printf '%s|' " + shell_join({"a b", "c'd", "*", "$HOME"}));
  EXPECT_EQ(echo.output, "a b|c'd|*|$HOME|");
}

}  // namespace
}  // namespace mptrain
