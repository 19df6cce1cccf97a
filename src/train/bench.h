// `mptrain bench`: times full GPT-2 training steps on synthetic tokens and, in the
// same invocation, the PyTorch peer (bench/pytorch_gpt2.py) on the same model, batch
// and optimizer, printing both and their ratio.
#pragma once
#include <string>

#include "core/progress.h"

namespace mptrain {

struct BenchOptions {
  std::string preset = "gpt2";
  int vocab_multiple = 128;
  int batch = 4;
  int seq = 256;
  int steps = 5;    // timed steps
  int warmup = 1;   // untimed steps first
  int threads = 0;  // 0 = all cores
  std::string optimizer = "adamw";  // adamw | sophia (default hyperparameters; Hessian every 10 steps)
  bool peer = true;
  ProgressMode progress = ProgressMode::kAuto;  // bar on a terminal (step lines above it), else lines
  bool quiet = false;        // only the results
  double peak_tflops = 0.0;  // MFU's peak; 0 = estimate for this CPU (train/peak_flops.h)
  std::string python = "/usr/bin/python3";
  std::string peer_script;  // default: bench/pytorch_gpt2.py next to the build
};

struct BenchResult {
  double ms_per_step = 0.0;  // median
  double tokens_per_s = 0.0;
  double tflops = 0.0;
  double peer_ms_per_step = 0.0;  // 0 when the peer did not run
};

BenchResult run_bench(const BenchOptions& options);

}  // namespace mptrain
