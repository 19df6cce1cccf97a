// `mptrain bench --device cuda`: GPT-2 training steps timed on GPU 0 (cuda::Gpt2Device), one
// precision or, with --ladder, issue 8's rows (fp32 → tf32 → bf16 → fused kernels → flash
// attention → padded vocabulary → CUDA graphs) in this one process, then the PyTorch GPU peer
// unless --no-peer. Implemented by
// src/backend/cuda/gpt2_bench.cpp, and by src/backend/nocuda/gpt2_bench.cpp in a build without
// the CUDA backend (there it throws one clear Error), so bench.cpp calls it without an #ifdef.
#pragma once
#include "train/bench.h"

namespace mptrain {

// The MFU peak of both GPU benches unless --peak-tflops: the H100 SXM's bf16 dense tensor-core
// figure from its data sheet, for every row (so rows compare).
constexpr double kH100SxmBf16DenseTflops = 989.0;

// Prints one line per row (and the ladder's table); returns the first row's result.
// Throws Error when this build has no CUDA backend or the machine has no GPU, and for options
// the device bench does not support (--model bert, --optimizer sophia).
BenchResult run_cuda_bench(const BenchOptions& options);

// `--model bert`: BERT's forward + losses + backward on GPU 0 (cuda::BertDevice; no optimizer
// step yet) on the CPU bench's synthetic instances, one precision or, with --ladder, fp32, tf32,
// bf16 and fp16 (src/backend/cuda/bert_bench.cpp; the nocuda twin throws).
BenchResult run_cuda_bert_bench(const BenchOptions& options);

}  // namespace mptrain
