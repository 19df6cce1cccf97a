// `mptrain bench`: times full training steps of a model family on synthetic data and, in the
// same invocation, the PyTorch peer on the same model, batch and optimizer, printing both and
// their ratio. --model gpt2 (default): random tokens, bench/pytorch_gpt2.py. --model bert:
// BertForPreTraining steps (MLM + NSP) on synthetic instances (see BenchOptions::model),
// bench/pytorch_bert.py (the same model written in plain torch). Everything below (one
// precision, the ladder, the peer, the table) is the same machinery for both families.
//
// --precision P times one precision (the peer runs fp32, or bf16 under torch's CPU
// autocast; torch 1.13 has no CPU fp16/TF32 autocast, so those have no peer).
// --ladder times fp32, tf32, bf16 and fp16 on the same preset, batch and sequence (with --device
// cuda: the PyTorch GPT-2 walkthrough's steps, fp32 → TF32 → bf16 → fused epilogues → flash
// attention → padded vocabulary → CUDA graphs, against the GPU peer in its best recipe), each in
// its own child process (`mptrain bench --precision P --result-line`), so that each one's
// peak memory is its own resident-set high-water mark (VmHWM: parameters, gradients,
// optimizer state, activations, low-precision weight copies and library workspaces, all of
// it) -- shown beside the model's own accounting of the buffers it plans -- then the peer in
// fp32 and bf16, and prints one table with the speed-up over fp32 and the mptrain/PyTorch ratios.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/make_backend.h"
#include "core/progress.h"
#include "core/stats.h"  // median: every bench reports it
#include "model/llama_config.h"
#include "model/recompute.h"
#include "model/presets.h"
#include "optim/muon.h"
#include "optim/optimizer.h"
#include "precision/precision.h"

namespace mptrain {

class Backend;
struct Quietness;

struct BenchOptions {
  // gpt2 | bert. BERT's synthetic instances (the same recipe in bench/pytorch_bert.py, so both
  // sides do the same work): row b holds T - (b mod 4)·(T/8) real tokens ([CLS] A [SEP] B [SEP],
  // then [PAD]s, attention mask 0 there), segment A the first half of the content, random
  // WordPiece ids >= 999, round(15%) of each row's content positions masked ([MASK], labels the
  // original ids), a random NSP label per row; fresh ids, positions and labels every step.
  ModelFamily model = ModelFamily::Gpt2;
  std::string preset = "gpt2";  // GPT-2 preset, or BERT preset (model/bert_config.h)
  LlamaBlockOptions llama_block;  // --mlp, --qk-norm (Llama)
  Device device = Device::Cpu;  // cpu | cuda (GPU 0: the same step on the CUDA backend)
  int vocab_multiple = 128;     // the CLI defaults it to 64 for BERT (bert_preset's default)
  int batch = 4;
  int seq = 256;
  int steps = 5;                    // timed steps
  int warmup = 1;                   // untimed steps first
  int threads = 0;                  // 0 = all cores
  OptimizerKind optimizer = OptimizerKind::AdamW;  // default hyperparameters; Sophia: Hessian every 10 steps
  MuonQkv muon_qkv = MuonQkv::Three;               // Muon: q, k, v as three matrices or one
  Precision precision = Precision::Fp32;
  bool ladder = false;              // every precision in one run (see above)
  bool result_line = false;         // also print one machine-readable "RESULT key=value ..." line
  bool peer = true;
  // Time every op of the timed steps and print where the step's time goes (bench/op_profile_report.h);
  // the CPU backend only, without the peer.
  bool profile = false;
  // With the peer: rounds of (our timed steps, one peer run), alternated, each side's median
  // over the rounds (the ladder: every precision's run and its peer's, R times over).
  int rounds = 3;
  ProgressMode progress = ProgressMode::kAuto;  // bar on a terminal (step lines above it), else lines
  bool quiet = false;                           // only the results
  double peak_tflops = 0.0;                     // MFU's peak; 0 = estimate for this CPU (train/peak_flops.h)
  // The CUDA backend's options (backend/device.h); the GPU ladder's rungs turn them off.
  bool cuda_fuse = true;
  bool cuda_flash = true;
  // GPT-2's pass replayed from a graph (model/gpt2.h's set_graphs; CUDA graphs on a GPU). Its
  // first step runs eagerly and its second captures: --warmup 2 at least, so only replays are timed.
  bool graphs = false;
  RecomputeSet recompute;  // --recompute (GPT-2): the model FLOPs stay the step's, as MFU counts them
  // BERT on a real instance file (bench/bert_layouts.h): padded against unpadded batches.
  std::string data;                   // a `prepare --task bert` instance file; empty: synthetic
  std::string batch_layout = "both";  // with data: padded | unpadded | both (alternating)
  std::string python = "/usr/bin/python3";
  std::string peer_script;  // default: bench/pytorch_<model>.py next to the build
};

struct BenchResult {
  double ms_per_step = 0.0;  // median
  double tokens_per_s = 0.0;
  double tflops = 0.0;
  double peak_rss_mb = 0.0;  // VmHWM of the process after the timed steps
  double device_mb = 0.0;    // --device cuda: the GPU's memory in use after the timed steps
  // The model's own accounting: fp32 parameters + gradients + optimizer state, the GEMM weight
  // copies (bf16/fp16) and the planned activations (in the dtypes the policy stores them).
  double model_mb = 0.0;
  float last_loss = 0.0f;
  int64_t skipped_steps = 0;      // fp16: steps the loss scaler skipped
  double peer_ms_per_step = 0.0;  // 0 when the peer did not run
};

// BERT's synthetic batch shape (the recipe above): masked positions in all of a B x T batch.
int bert_bench_masked_positions(int B, int T);

// The backend a bench step runs on: the CPU's, or GPU 0's with --device cuda.
std::unique_ptr<Backend> bench_backend(const BenchOptions& o);
// The quietness line under every ratio (core/quietness.h), and its warning when other work took
// CPU time during the run.
void report_quietness(const Quietness& q, bool ratio);

// One rung of the ladder: a precision's (on a GPU, a step of the walkthrough's) result, or why it
// has none.
struct LadderRung {
  std::string precision;  // the rung's label: "bf16", or on a GPU e.g. "bf16 + flash attention"
  BenchResult result;
  std::string error;  // empty when the rung ran
};

// One precision, or with options.ladder the whole ladder (the result is then fp32's).
BenchResult run_bench(const BenchOptions& options);
// The ladder alone (also what run_bench does with options.ladder): one rung per precision.
std::vector<LadderRung> run_ladder(const BenchOptions& options);

}  // namespace mptrain
