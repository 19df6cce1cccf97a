// The tokenizer benchmark: rounds of mptrain on 1 thread, on every core (each run from an
// empty merge cache) and node running the npm encoder on the same documents (a fresh
// process, an empty cache), alternated; each side's median over the rounds, the ratios and
// the machine's quietness (core/quietness.h).
#include "data/tokenizer_bench.h"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string_view>
#include <thread>

#include "core/error.h"
#include "core/quietness.h"
#include "core/stats.h"
#include "data/gpt2_tokenizer.h"
#include "data/prepare.h"
#include "io/fileutil.h"

namespace fs = std::filesystem;

namespace mptrain {

namespace {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string find_npm_script(const std::string& flag) {
  if (!flag.empty()) return flag;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    fs::path p = exe.parent_path().parent_path() / "bench" / "npm_encode.js";
    if (fs::exists(p)) return p.string();
  }
  return "bench/npm_encode.js";
}

// Runs a shell command; returns its exit status and its stdout + stderr.
int run_capture(const std::string& cmd, std::string& output) {
  std::FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) output.append(buf, n);
  int status = ::pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TokenizerBenchResult run_tokenizer_bench(const Gpt2Tokenizer& tok, const TokenizerBenchOptions& opt,
                                         std::FILE* out) {
  const QuietnessMeter meter;
  const std::vector<TextFile> files = expand_inputs(opt.inputs, opt.excludes);
  std::vector<std::string> texts;
  texts.reserve(files.size());
  std::vector<std::string_view> docs;
  TokenizerBenchResult r;
  for (const auto& f : files) texts.push_back(read_text_file(f.path));
  for (const auto& t : texts)
    for (std::string_view d : split_documents(t, opt.doc_delimiter)) {
      docs.push_back(d);
      r.bytes += d.size();
    }
  if (docs.empty()) throw Error("tokenize --bench: the inputs hold no text");
  r.documents = docs.size();
  r.threads =
      opt.threads > 0 ? opt.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  // One timed encode of every document on `threads` threads, from an empty merge cache.
  auto mb_s = [&](int threads) {
    const auto t0 = std::chrono::steady_clock::now();
    EncodedDocuments ids;
    encode_documents(tok, docs, threads, ids);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.tokens = ids.ids.size();
    return r.bytes / s / 1e6;
  };
  std::fprintf(out, "tokenizer bench: %zu documents, %.2f MB from %zu file(s)\n", r.documents, r.bytes / 1e6,
               files.size());

  // The npm side, when it can run: the exact documents handed over as (uint32 length, bytes).
  std::string script, pkg = opt.npm_package, blob_path;
  if (!opt.npm) {
    r.npm_note = "skipped (--no-npm)";
  } else if (std::system("command -v node >/dev/null 2>&1") != 0) {
    r.npm_note = "skipped: node is not installed";
  } else if (!fs::exists(script = find_npm_script(opt.npm_script))) {
    r.npm_note = "skipped: " + script + " not found (pass --npm-script)";
  } else if (!fs::exists(fs::path(pkg) / "Encoder.js")) {
    r.npm_note = "skipped: no gpt-3-encoder package (Encoder.js) in '" + pkg + "'";
  } else {
    char tmpl[] = "/tmp/mptrain-tokbench-XXXXXX";
    int fd = ::mkstemp(tmpl);
    if (fd < 0) throw Error(std::string("tokenize --bench: cannot create a temporary file: ") + std::strerror(errno));
    ::close(fd);
    std::string blob;
    for (std::string_view d : docs) {
      uint32_t n = static_cast<uint32_t>(d.size());
      blob.append(reinterpret_cast<const char*>(&n), 4);
      blob.append(d);
    }
    write_file_atomic(tmpl, blob);
    blob_path = tmpl;
    r.npm_ran = true;
  }
  // One node process (an empty cache, like each mptrain run); false with the reason when it failed.
  auto npm_run = [&](double& mb) {
    std::string output;
    int rc = run_capture("node " + shell_quote(script) + " " + shell_quote(pkg) + " " + shell_quote(blob_path), output);
    nlohmann::json j;
    try {
      size_t brace = output.rfind('{');
      j = nlohmann::json::parse(output.substr(brace == std::string::npos ? 0 : brace));
    } catch (const nlohmann::json::exception&) {
      rc = rc == 0 ? -1 : rc;
    }
    if (rc != 0) {
      r.npm_note = "failed (exit " + std::to_string(rc) + "): " + output.substr(0, 300);
      return false;
    }
    r.npm_tokens = j.at("tokens").get<uint64_t>();
    r.npm_note = "node " + j.at("node").get<std::string>();
    mb = j.at("bytes").get<double>() / j.at("seconds").get<double>() / 1e6;
    return true;
  };

  // Rounds, alternated (mptrain on 1 thread, on every core, then npm; again ...), so that a
  // machine's drift hits every side alike; each side's median over the rounds counts.
  const int rounds = std::max(1, opt.rounds);
  std::vector<double> one, all, npm;
  for (int round = 0; round < rounds; ++round) {
    one.push_back(mb_s(1));
    all.push_back(mb_s(r.threads));
    double mb = 0;
    if (r.npm_ran && (r.npm_ran = npm_run(mb))) npm.push_back(mb);
    char npm_text[48] = "";
    if (npm.size() == static_cast<size_t>(round + 1)) std::snprintf(npm_text, sizeof(npm_text), ", npm %.2f", npm.back());
    std::fprintf(out, "  round %d/%d: MB/s mptrain %.2f on 1 thread, %.2f on %d%s\n", round + 1, rounds, one.back(),
                 all.back(), r.threads, npm_text);
    std::fflush(out);
  }
  if (!blob_path.empty()) ::unlink(blob_path.c_str());
  r.npm_runs = static_cast<int>(npm.size());
  r.mb_s_1 = median(one);
  r.mb_s_all = median(all);
  std::fprintf(out, "  %-24s %8.2f MB/s  (median of %d rounds, %llu tokens)\n", "mptrain, 1 thread:", r.mb_s_1, rounds,
               static_cast<unsigned long long>(r.tokens));
  const std::string all_label = "mptrain, " + std::to_string(r.threads) + " threads:";
  std::fprintf(out, "  %-24s %8.2f MB/s  (median of %d rounds)\n", all_label.c_str(), r.mb_s_all, rounds);
  if (r.npm_ran) {
    r.npm_mb_s = median(npm);
    std::fprintf(out, "  %-24s %8.2f MB/s  (median of %d rounds, %s, %llu tokens: %s)\n", "npm gpt-3-encoder:",
                 r.npm_mb_s, r.npm_runs, r.npm_note.c_str(), static_cast<unsigned long long>(r.npm_tokens),
                 r.npm_tokens == r.tokens ? "same count" : "DIFFERENT count");
    std::fprintf(out, "  %-24s %.1fx on 1 thread, %.1fx on %d threads\n", "speed-up over npm:", r.mb_s_1 / r.npm_mb_s,
                 r.mb_s_all / r.npm_mb_s, r.threads);
  } else {
    std::fprintf(out, "  %-24s %s\n", "npm gpt-3-encoder:", r.npm_note.c_str());
  }
  const Quietness q = meter.finish();
  std::fprintf(out, "  quietness: %s\n", q.describe().c_str());
  if (r.npm_ran && q.busy()) std::fprintf(out, "  warning: %s\n", q.warning().c_str());
  return r;
}

}  // namespace mptrain
