// Training-step benchmark (GPT-2 or BERT) with an in-process-run PyTorch comparison.
#include "bench/bench.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <vector>

#include "backend/device.h"
#include "backend/make_backend.h"
#include "bench/bert_layouts.h"
#include "bench/bert_synthetic.h"
#include "bench/child_result.h"
#include "bench/op_profile_report.h"
#include "core/error.h"
#include "core/quietness.h"
#include "core/rng.h"
#include "model/bert.h"
#include "model/bert_config.h"
#include "model/gpt2.h"
#include "model/llama.h"
#include "optim/adamw.h"
#include "optim/make_optimizer.h"
#include "precision/loss_scaler.h"
#include "precision/precision.h"
#include "train/metrics.h"
#include "train/peak_flops.h"
#include "train/step.h"

namespace mptrain {

namespace fs = std::filesystem;

namespace {

// The bench's GPT-2: the preset, with --recompute.
Gpt2Config bench_gpt2_config(const BenchOptions& o) {
  Gpt2Config c = gpt2_preset(o.preset, o.vocab_multiple);
  c.recompute = o.recompute;
  return c;
}

// The bench's Llama: the preset with --mlp, --qk-norm and --recompute.
LlamaConfig bench_llama_config(const BenchOptions& o) {
  LlamaConfig c = llama_preset(o.preset, o.vocab_multiple, o.llama_block);
  c.recompute = o.recompute;
  return c;
}

// The MFU peak of the GPU bench unless --peak-tflops: the bf16 dense tensor-core figure from the
// data sheets of the H100 SXM and the H200 SXM (the same chip's arithmetic: 989 TFLOP/s both).
constexpr double kHopperSxmBf16DenseTflops = 989.0;

bool is_bert(const BenchOptions& o) { return o.model == ModelFamily::Bert; }
bool is_llama(const BenchOptions& o) { return o.model == ModelFamily::Llama; }

BertConfig bench_bert_config(const BenchOptions& o) {
  BertConfig c = bert_preset(o.preset, 30522, o.vocab_multiple);
  c.recompute = o.recompute;
  return c;
}

// What the ladder, the peer and the table need to know about the model, without building it.
// Also where a bad preset or sequence length fails, once, before any child process starts.
struct ModelInfo {
  size_t n_params = 0;
  double flops_per_step = 0.0;
  std::string flops_note;  // how the FLOPs were counted, for the table's footnote
  std::string peer_name;   // the peer's file under bench/
  std::string peer_args;   // the peer's model-specific arguments
};

ModelInfo model_info(const BenchOptions& o) {
  ModelInfo m;
  const double tokens = static_cast<double>(o.batch) * o.seq;
  if (is_bert(o)) {
    const BertConfig config = bench_bert_config(o);
    MPT_CHECK(o.seq <= config.max_position, "--seq " + std::to_string(o.seq) +
                                                " is longer than the model's " +
                                                std::to_string(config.max_position) + " positions");
    MPT_CHECK(o.seq >= 8,
              "--seq " + std::to_string(o.seq) +
                  " is too short for BERT's synthetic instances ([CLS] A [SEP] B [SEP] and padding): "
                  "use 8 or more");
    const int masked = bert_bench_masked_positions(o.batch, o.seq);
    m.n_params = bert_param_table(config).total();
    m.flops_per_step = bert_flops_per_token(config, o.seq, masked / tokens) * tokens;
    char note[160];
    std::snprintf(note, sizeof(note),
                  "6 x GEMM parameters per token, the MLM head on the %d masked positions only, + 12LCT; %zu "
                  "parameters",
                  masked, m.n_params);
    m.flops_note = note;
    m.peer_name = "pytorch_bert.py";
    m.peer_args = " --vocab " + std::to_string(config.vocab_size) + " --padded-vocab " +
                  std::to_string(config.padded_vocab_size);
    return m;
  }
  // A causal LM: its context checked, N and the FLOPs counted from its table and config.
  const auto causal = [&](const auto& config, const ParamTable& table, double flops_per_token) {
    MPT_CHECK(o.seq <= config.block_size, "--seq " + std::to_string(o.seq) +
                                              " is longer than the model's context of " +
                                              std::to_string(config.block_size));
    m.n_params = table.total();
    m.flops_per_step = flops_per_token * tokens;
    m.flops_note = "6N + 6LCT per token, " + std::to_string(m.n_params) + " parameters";
  };
  if (is_llama(o)) {  // no PyTorch peer: the family's comparison is with GPT-2's bench
    const LlamaConfig config = bench_llama_config(o);
    causal(config, llama_param_table(config), llama_flops_per_token(config, o.seq));
    return m;
  }
  const Gpt2Config config = bench_gpt2_config(o);
  causal(config, gpt2_param_table(config), gpt2_flops_per_token(config, o.seq));
  m.peer_name = "pytorch_gpt2.py";
  m.peer_args = " --vocab " + std::to_string(config.padded_vocab_size);
  return m;
}

// What the peer printed on its RESULT line.
struct PeerResult {
  double ms = 0.0;  // 0: the peer did not run or failed
  double peak_rss_mb = 0.0;
  std::string torch;  // the peer's torch version, as it reports it
};

// Runs the peer in `precision` (fp32, or bf16 = torch's CPU autocast) and returns its median
// ms/step and peak memory, parsed from its "RESULT ms_per_step=…" line.
PeerResult run_peer(const BenchOptions& o, int threads, const ModelInfo& info, const std::string& precision,
                    bool echo) {
  const std::string script = o.peer_script.empty() ? default_peer_script(info.peer_name) : o.peer_script;
  if (script.empty() || !fs::exists(script)) {
    std::printf("peer: bench/%s not found; skipping the PyTorch comparison\n", info.peer_name.c_str());
    return {};
  }
  // ATen dispatches AVX2 kernels unless told otherwise; AVX-512 is 5-10% faster where the CPU
  // has it (and an illegal instruction where it does not).
  const std::string cap = __builtin_cpu_supports("avx512f") ? "ATEN_CPU_CAPABILITY=avx512 " : "";
  const std::string cmd = cap + o.python + " " + script + " --preset " + o.preset + " --batch " +
                          std::to_string(o.batch) + " --seq " + std::to_string(o.seq) + " --steps " +
                          std::to_string(o.steps) + " --warmup " + std::to_string(o.warmup) +
                          " --precision " + precision + " --threads " + std::to_string(threads) +
                          info.peer_args + " 2>&1";
  if (echo) std::printf("peer: %s\n", cmd.c_str());
  const ChildResult c = run_child(cmd, [&](const char* line) {
    if (echo) std::printf("  [torch] %s", line);
  });
  PeerResult r{c.field("ms_per_step"), c.field("peak_rss_mb"), c.text_field("torch")};
  if (!c.ok() || r.ms <= 0.0) {
    std::printf("peer: PyTorch %s run failed (exit status %d); no ratio\n", precision.c_str(), c.exit_status);
    return {};
  }
  return r;
}

// The precisions the CPU peer has: fp32, and bf16 under torch's CPU autocast (Debian's torch 1.13
// has no CPU fp16 or TF32 autocast).
bool peer_has(Precision p) { return p == Precision::Fp32 || p == Precision::Bf16; }

// The GPU's MFU peak: --peak-tflops, or the H100/H200 SXM's bf16 dense data-sheet figure, named
// after the GPU it runs on (another GPU: the figure is said to be the H100's).
PeakFlops gpu_peak_flops(const BenchOptions& o) {
  if (o.peak_tflops > 0) return {o.peak_tflops, "--peak-tflops"};
  const std::string gpu = cuda_device_count() > 0 ? cuda_device_name(0) : "";
  const char* card = gpu.find("H200") != std::string::npos ? "H200" : "H100";
  return {kHopperSxmBf16DenseTflops,
          std::string("the ") + card + " SXM's bf16 dense tensor-core data-sheet figure" +
              (gpu.empty() || gpu.find(card) != std::string::npos ? "" : " (this GPU: " + gpu + "; --peak-tflops)")};
}

// The PyTorch GPU peer on the same model, batch and sequence, in its best recipe (bf16 autocast,
// torch.compile, fused attention, the padded vocabulary): bench/pytorch_gpt2_cuda.py for GPT-2,
// bench/pytorch_bert.py --device cuda for BERT. Its median ms/step (0: no result, said why).
double run_cuda_peer(const BenchOptions& o, const ModelInfo& info) {
  const std::string name = is_bert(o) ? info.peer_name : "pytorch_gpt2_cuda.py";
  const std::string script = o.peer_script.empty() ? default_peer_script(name) : o.peer_script;
  if (script.empty()) {
    std::printf("peer: bench/%s not found; skipping the PyTorch comparison\n", name.c_str());
    return 0.0;
  }
  const std::string recipe = is_bert(o) ? " --precision bf16 --device cuda --compile"
                                        : " --precision bf16 --attn flash --compile";
  const std::string cmd = o.python + " " + script + " --preset " + o.preset + " --batch " +
                          std::to_string(o.batch) + " --seq " + std::to_string(o.seq) + " --steps " +
                          std::to_string(o.steps) + " --warmup " + std::to_string(o.warmup) + recipe +
                          info.peer_args + " 2>&1";
  std::printf("\npeer: %s\n", cmd.c_str());
  const ChildResult c = run_child(cmd, [&](const char* line) {
    if (!o.quiet) std::printf("  [torch] %s", line);
  });
  const double ms = c.field("ms_per_step");
  if (!c.ok() || ms <= 0.0) {
    std::printf("peer: PyTorch run failed (exit status %d: %s); no ratio\n", c.exit_status,
                c.last_line.c_str());
    return 0.0;
  }
  return ms;
}

// The model a bench times on its backend, its optimizer and loss scaler, and the one step it runs
// (train_step, as training does) on fresh synthetic data each time. Built in place: the step's
// closures refer to the members.
struct BenchModel {
  std::unique_ptr<CausalLm> lm;  // GPT-2 or Llama
  std::unique_ptr<Bert> bert;
  std::unique_ptr<BertSynthetic> bert_data;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<LossScaler> scaler;  // fp16 times the scaler's work too (unscale + inf check)
  std::vector<int> inputs, targets;
  uint64_t draw = 0;
  NextBatchFn next;
  StepModel bert_step;
  std::function<StepStats(int64_t t)> step;
  const ModelCore& core() const { return bert ? static_cast<const ModelCore&>(*bert) : *lm; }
};

// The family's model on the bench's backend under its own plan (a GPU's: 16-bit stream, logits and
// gradients), initialised, planned for the batch, with its optimizer and step.
std::unique_ptr<BenchModel> build_bench_model(const BenchOptions& o) {
  auto m = std::make_unique<BenchModel>();
  std::unique_ptr<Backend> be = bench_backend(o);
  const Policy policy = plan_policy(o.precision, PolicyOf::Own, *be);
  const size_t n = static_cast<size_t>(o.batch) * o.seq;
  if (is_bert(o)) {
    const BertConfig config = bench_bert_config(o);
    m->bert = std::make_unique<Bert>(config, std::move(be), policy);
    m->bert->init_weights(1337);
    m->bert->plan(o.batch, o.seq, bert_bench_masked_positions(o.batch, o.seq));
    m->bert_data = std::make_unique<BertSynthetic>(o.batch, o.seq, config.vocab_size);
  } else {
    if (is_llama(o))
      m->lm = std::make_unique<Llama>(bench_llama_config(o), std::move(be), policy);
    else
      m->lm = std::make_unique<Gpt2>(bench_gpt2_config(o), std::move(be), policy);
    m->lm->init_weights(1337);
    m->lm->plan(o.batch, o.seq);
    m->lm->set_graphs(o.graphs);
  }
  Backend& model_backend = m->core().backend();
  MuonHyper muon;  // Newton–Schulz in the policy's arithmetic, as training runs it
  muon.qkv = o.muon_qkv;
  muon.ns_math = policy.rule(OpRole::NewtonSchulz).compute;
  m->optimizer = make_optimizer(o.optimizer, m->core().table(), AdamWHyper{}, SophiaHyper{},
                                static_cast<double>(n), 1337, model_backend, muon);
  if (needs_loss_scaler(o.precision)) m->scaler = std::make_unique<LossScaler>();
  BenchModel* b = m.get();
  if (m->bert) {
    Bert* model = m->bert.get();
    BertSynthetic* data = m->bert_data.get();
    const int B = o.batch, T = o.seq;
    m->bert_step = core_step_model(*model);
    m->bert_step.micro_step = [model, data, B, T](float grad_scale) {
      data->next();
      return model->forward_backward(data->inputs(), B, T, grad_scale).loss();
    };
    m->bert_step.curvature = [model, data, B, T](float grad_scale, uint64_t seed, uint64_t counter) {
      return model->forward_backward_sampled(data->inputs(), B, T, grad_scale, seed, counter).loss();
    };
    m->step = [b](int64_t t) { return train_step(b->bert_step, *b->optimizer, 1, 1e-4f, 1.0f, t, b->scaler.get()); };
    return m;
  }
  m->inputs.resize(n), m->targets.resize(n);
  const int vocab = m->lm->vocab();
  m->next = [b, n, vocab](int* in, int* tg) {
    for (size_t i = 0; i < n; ++i) {
      in[i] = static_cast<int>(uniform01(42, 1, b->draw++) * vocab);
      tg[i] = static_cast<int>(uniform01(42, 2, b->draw++) * vocab);
    }
  };
  const int B = o.batch, T = o.seq;
  m->step = [b, B, T](int64_t t) {
    return train_step(*b->lm, *b->optimizer, b->next, B, T, 1, 1e-4f, 1.0f, t, b->inputs.data(),
                      b->targets.data(), b->scaler.get());
  };
  return m;
}

// What a step costs, for the progress line and the MFU column.
struct StepCost {
  double tokens = 0.0, flops = 0.0;
  PeakFlops peak;
};

// The timed steps: warm-up, then per round --steps timed steps and (with the peer) one peer run,
// alternated (A B A B ...) so that a machine's drift hits both sides alike. With `profile`, every
// op of the timed steps is recorded there (not the warm-up's).
struct TimedSteps {
  std::vector<double> round_ms, peer_ms;  // each round's median, each peer run's
  PeerResult peer;                        // the last peer run
  double timed_ms = 0.0;                  // every timed step's, summed (the profile's time)
  int steps = 0;                          // warm-up included
  float last_loss = 0.0f;
};

TimedSteps time_steps(const BenchOptions& o, BenchModel& m, const StepCost& cost, int rounds, bool with_peer,
                      int threads, const ModelInfo& info, OpProfile* profile) {
  Progress progress({.label = "bench",
                     .total = static_cast<double>(o.warmup + rounds * o.steps),
                     .mode = o.quiet ? ProgressMode::kNone : o.progress,
                     .out = stdout});
  TimedSteps r;
  auto run_step = [&](bool timed, std::vector<double>* times) {
    const auto t0 = std::chrono::steady_clock::now();
    const StepStats st = m.step(r.steps + 1);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    char line[200], status[160];
    std::snprintf(line, sizeof(line), "  step %d%s: %.1f ms (loss %.4f)%s%s", r.steps + 1,
                  timed ? "" : " (warmup)", ms, st.loss, st.curvature ? " + Hessian estimate" : "",
                  st.skipped ? " (skipped: inf/NaN gradient)" : "");
    std::snprintf(status, sizeof(status), "step %d/%d | %.1f ms | %s tok/s | MFU %.2f%%", r.steps + 1,
                  o.warmup + rounds * o.steps, ms, format_si(cost.tokens / (ms / 1e3)).c_str(),
                  mfu(cost.flops / (ms / 1e3), cost.peak) * 100.0);
    if (progress.mode() != ProgressMode::kNone) progress.print(line);
    progress.draw(++r.steps, status);
    if (times) times->push_back(ms);
    r.last_loss = st.loss;
  };
  for (int w = 0; w < o.warmup; ++w) run_step(false, nullptr);
  Backend& backend = m.core().backend();
  backend.set_profile(profile);
  for (int round = 0; round < rounds; ++round) {
    std::vector<double> times;
    for (int t = 0; t < o.steps; ++t) run_step(true, &times);
    for (double ms : times) r.timed_ms += ms;
    r.round_ms.push_back(median(times));
    if (!with_peer) continue;
    progress.finish();
    const PeerResult p = run_peer(o, threads, info, precision_name(o.precision), !o.quiet && round == 0);
    if (p.ms <= 0.0) break;  // run_peer said why; no ratio
    r.peer = p;
    r.peer_ms.push_back(p.ms);
    std::printf("round %d/%d: mptrain %.1f ms/step, PyTorch %.1f ms/step\n", round + 1, rounds,
                r.round_ms.back(), p.ms);
  }
  backend.set_profile(nullptr);
  progress.finish();
  return r;
}

// The result of the timed steps, and its line (and the ladder's RESULT line).
BenchResult bench_result(const BenchOptions& o, const BenchModel& m, const TimedSteps& t, const StepCost& cost) {
  BenchResult r;
  r.ms_per_step = median(t.round_ms);
  r.tokens_per_s = cost.tokens / (r.ms_per_step / 1e3);
  r.tflops = cost.flops / (r.ms_per_step / 1e3) / 1e12;
  r.peak_rss_mb = static_cast<double>(peak_rss_bytes()) / (1024.0 * 1024.0);
  const bool on_cuda = o.device == Device::Cuda;
  if (on_cuda) {
    const DeviceMemoryInfo gpu = cuda_memory_info(0);
    r.device_mb = static_cast<double>(gpu.total - gpu.free) / (1024.0 * 1024.0);
  }
  const ModelCore& core = m.core();
  size_t model_bytes = 2 * core.num_params() * sizeof(float) + core.weight_copy_bytes() + core.activation_bytes();
  for (const auto& st : m.optimizer->state()) model_bytes += st.buffer.size() * sizeof(float);
  r.model_mb = static_cast<double>(model_bytes) / (1024.0 * 1024.0);
  r.skipped_steps = m.scaler ? m.scaler->skipped_steps() : 0;
  r.last_loss = t.last_loss;
  const char* precision = precision_name(o.precision);
  const std::string median_of =
      t.round_ms.size() > 1
          ? std::to_string(t.round_ms.size()) + " rounds' medians of " + std::to_string(o.steps) + " steps"
          : std::to_string(o.steps);
  std::printf(
      "mptrain %s: %.1f ms/step | %.0f tok/s | %.3f TFLOP/s | MFU %.2f%% | %s %.0f MB, model %.0f MB "
      "(median of %s)\n",
      precision, r.ms_per_step, r.tokens_per_s, r.tflops, mfu(r.tflops * 1e12, cost.peak) * 100.0,
      on_cuda ? "GPU memory in use" : "peak RSS", on_cuda ? r.device_mb : r.peak_rss_mb, r.model_mb,
      median_of.c_str());
  if (m.scaler && r.skipped_steps > 0)
    std::printf("fp16: %lld of %d steps skipped by the loss scaler (final scale %g)\n", (long long)r.skipped_steps,
                t.steps, m.scaler->scale());
  if (o.result_line)
    std::printf(
        "RESULT precision=%s ms_per_step=%.3f tokens_per_s=%.1f tflops=%.5f peak_rss_mb=%.1f device_mb=%.1f "
        "model_mb=%.1f loss=%.6f skipped=%lld\n",
        precision, r.ms_per_step, r.tokens_per_s, r.tflops, r.peak_rss_mb, r.device_mb, r.model_mb, r.last_loss,
        (long long)r.skipped_steps);
  return r;
}

// The peer's line and the ratio (the GPU's peer runs here, after our steps; the CPU's alternated
// with them), or why there is none. Fills r.peer_ms_per_step.
void report_peer(const BenchOptions& o, const ModelInfo& info, const TimedSteps& t, double tokens, BenchResult& r) {
  const char* precision = precision_name(o.precision);
  if (info.peer_name.empty()) {
    std::printf("peer: none for --model %s (compare it with GPT-2's bench at the same size)\n",
                model_family_name(o.model));
  } else if (!o.peer || o.profile) {  // a profiled step (each op waited for) is no step to compare
  } else if (o.device == Device::Cuda) {
    const double peer = run_cuda_peer(o, info);
    if (peer > 0) {
      r.peer_ms_per_step = peer;
      std::printf(
          "ratio: mptrain %s is %.2fx the speed of PyTorch (bf16 autocast + torch.compile + %s, same "
          "model and batch)\n",
          precision, peer / r.ms_per_step, is_bert(o) ? "fused SDPA, fused AdamW" : "flash SDPA");
    }
  } else if (o.optimizer != OptimizerKind::AdamW) {
    std::printf("peer: skipped (bench/%s runs AdamW; no like-for-like %s peer)\n", info.peer_name.c_str(),
                optimizer_name(o.optimizer));
  } else if (!peer_has(o.precision)) {
    std::printf("peer: skipped (the peer runs fp32 or bf16: torch 1.13, Debian's, has no CPU %s autocast)\n",
                precision);
  } else if (!t.peer_ms.empty()) {
    r.peer_ms_per_step = median(t.peer_ms);
    std::printf("pytorch %s: %.1f ms/step | %.0f tok/s | peak RSS %.0f MB (median of %zu rounds)\n", precision,
                r.peer_ms_per_step, tokens / (r.peer_ms_per_step / 1e3), t.peer.peak_rss_mb, t.peer_ms.size());
    std::printf(
        "ratio: mptrain is %.2fx the speed of PyTorch (%s%s, same model, batch and optimizer; medians of %zu "
        "alternating rounds)\n",
        r.peer_ms_per_step / r.ms_per_step, precision, o.precision == Precision::Bf16 ? " autocast" : "",
        t.peer_ms.size());
  }
}

// Times one precision in this process, on the CPU or (--device cuda) GPU 0: the same model and
// train_step that training runs.
BenchResult bench_one(const BenchOptions& o) {
  const QuietnessMeter meter;  // first: the load average before anything of ours ran
  MPT_CHECK(!o.graphs || !is_bert(o), std::string("--graphs: ") + Bert::kNoGraphs);
  check_recompute(o.recompute, is_bert(o)    ? RecomputeFamily::Bert
                               : is_llama(o) ? RecomputeFamily::Llama
                                             : RecomputeFamily::Gpt2);
  MPT_CHECK(!o.graphs || o.warmup >= 2,
            "--graphs needs --warmup 2 or more (the first step runs eagerly, the second captures the graph: "
            "only replays are timed)");
  const int threads = omp_get_max_threads();
  const ModelInfo info = model_info(o);
  const bool on_cuda = o.device == Device::Cuda;
  const std::unique_ptr<BenchModel> m = build_bench_model(o);
  const StepCost cost{static_cast<double>(o.batch) * o.seq, info.flops_per_step,
                      on_cuda ? gpu_peak_flops(o) : cpu_peak_flops(threads, o.peak_tflops, o.precision)};
  if (!o.quiet) {
    std::printf("bench: %s (%zu params), batch %d x %d, %s, %s, %d threads, %d warmup + %d timed steps\n",
                o.preset.c_str(), m->core().num_params(), o.batch, o.seq, precision_name(o.precision),
                m->optimizer->name(), threads, o.warmup, o.steps);
    if (m->bert)
      std::printf(
          "synthetic BERT instances: %d of %d positions masked per step, padding on 3 rows in 4, NSP "
          "labels\n",
          bert_bench_masked_positions(o.batch, o.seq), o.batch * o.seq);
    std::printf("MFU against a peak of %.3f TFLOP/s = %s\n", cost.peak.tflops, cost.peak.formula.c_str());
  }
  const bool with_peer = !on_cuda && o.peer && !o.profile && o.optimizer == OptimizerKind::AdamW &&
                         peer_has(o.precision) && !info.peer_name.empty();
  const int rounds = with_peer ? o.rounds : 1;
  OpProfile op_profile;
  const TimedSteps timed = time_steps(o, *m, cost, rounds, with_peer, threads, info, o.profile ? &op_profile : nullptr);
  BenchResult r = bench_result(o, *m, timed, cost);
  report_peer(o, info, timed, cost.tokens, r);
  if (o.profile && on_cuda) {
    // The GPU's figures: the datasheet peak (no FMA probe), its own copy bandwidth; each op was
    // waited for (Backend::set_profile), so the rows are device time plus a launch each.
    std::printf("\nop profile on the GPU: each op synchronized before and after (launch gaps included, no overlap)");
    print_op_profile(op_profile, rounds * o.steps, timed.timed_ms / 1e3, cost.flops, cost.peak, 0.0,
                     cuda_copy_bandwidth_gbs(0));
  } else if (o.profile) {
    print_op_profile(op_profile, rounds * o.steps, timed.timed_ms / 1e3, cost.flops, cost.peak,
                     measure_fma_peak_tflops(o.precision), measure_memory_bandwidth_gbs());
  }
  report_quietness(meter.finish(), r.peer_ms_per_step > 0.0);
  std::fflush(stdout);
  return r;
}

// One rung of a ladder: what its child process runs with.
struct RungSpec {
  std::string label;  // the table's first column
  Precision precision = Precision::Fp32;
  int vocab_multiple = 1;
  bool fuse = true, flash = true;  // the CUDA backend's options (backend/device.h)
  bool graphs = false;             // the pass replayed from a CUDA graph (--graphs)
};

// The CPU ladder: every precision on the same work.
std::vector<RungSpec> cpu_rungs(const BenchOptions& o) {
  std::vector<RungSpec> rungs;
  for (Precision p : {Precision::Fp32, Precision::Tf32, Precision::Bf16, Precision::Fp16})
    rungs.push_back({precision_name(p), p, o.vocab_multiple});
  return rungs;
}

// The GPU ladder, the steps of the PyTorch GPT-2 walkthrough (fp32 → TF32 → bf16 → torch.compile's
// fusions → flash attention → a "nice" vocabulary): each rung adds one thing to the one before.
// CUDA graphs, its last step, replay each micro-batch's pass (the optimizer's step stays eager;
// GPT-2 only: BERT's pass is not capturable yet).
std::vector<RungSpec> gpu_rungs(const BenchOptions& o) {
  std::vector<RungSpec> rungs = {{"fp32", Precision::Fp32, 1, false, false},
                                 {"tf32", Precision::Tf32, 1, false, false},
                                 {"bf16", Precision::Bf16, 1, false, false},
                                 {"bf16 + fused epilogues", Precision::Bf16, 1, true, false},
                                 {"bf16 + flash attention", Precision::Bf16, 1, true, true},
                                 {"bf16 + padded vocabulary", Precision::Bf16, o.vocab_multiple, true, true}};
  if (!is_bert(o))
    rungs.push_back({"bf16 + CUDA graphs", Precision::Bf16, o.vocab_multiple, true, true, true});
  return rungs;
}

// Runs `mptrain bench --precision P --result-line` (and the rung's options) as a child and parses
// its RESULT line.
LadderRung run_rung(const BenchOptions& o, int threads, const RungSpec& spec) {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  MPT_CHECK(!ec, "cannot find the mptrain executable (/proc/self/exe) to run the ladder's rungs");
  char peak[64] = "";
  if (o.peak_tflops > 0) std::snprintf(peak, sizeof(peak), " --peak-tflops %g", o.peak_tflops);
  std::string device = std::string(" --device ") + device_name(o.device);
  if (o.device == Device::Cuda)
    device += std::string(spec.fuse ? "" : " --cuda-unfused") + (spec.flash ? "" : " --cuda-no-flash") +
              (spec.graphs ? " --graphs" : "");
  const int warmup = spec.graphs ? std::max(o.warmup, 2) : o.warmup;
  const std::string cmd = self.string() + " bench --model " + model_family_name(o.model) + " --preset " + o.preset +
                          " --vocab-multiple " + std::to_string(spec.vocab_multiple) + " --batch " +
                          std::to_string(o.batch) + " --seq " + std::to_string(o.seq) + " --steps " +
                          std::to_string(o.steps) + " --warmup " + std::to_string(warmup) + " --threads " +
                          std::to_string(threads) + " --optimizer " + optimizer_name(o.optimizer) +
                          (o.optimizer == OptimizerKind::Muon ? std::string(" --muon-qkv ") + muon_qkv_name(o.muon_qkv)
                                                              : std::string()) +
                          " --precision " + precision_name(spec.precision) + device + peak +
                          " --no-peer --quiet --progress none --result-line 2>&1";
  LadderRung rung;
  rung.precision = spec.label;
  const ChildResult c = run_child(cmd, [&](const char* line) {
    if (!o.quiet && std::strncmp(line, "mptrain ", 8) == 0) std::printf("  %s", line);
  });
  rung.result.ms_per_step = c.field("ms_per_step");
  rung.result.tokens_per_s = c.field("tokens_per_s");
  rung.result.tflops = c.field("tflops");
  rung.result.peak_rss_mb = c.field("peak_rss_mb");
  rung.result.device_mb = c.field("device_mb");
  rung.result.model_mb = c.field("model_mb");
  rung.result.last_loss = static_cast<float>(c.field("loss"));
  rung.result.skipped_steps = static_cast<int64_t>(c.field("skipped"));
  if (!c.ok() || rung.result.ms_per_step <= 0.0)
    rung.error = c.last_line.empty() ? "exit status " + std::to_string(c.exit_status) : c.last_line;
  return rung;
}

// The run with the median ms/step (the upper one of an even count); failed runs only when every
// run failed.
LadderRung median_rung(std::vector<LadderRung> runs) {
  std::vector<LadderRung> ok;
  for (const LadderRung& r : runs)
    if (r.error.empty()) ok.push_back(r);
  if (ok.empty()) return runs.front();
  std::sort(ok.begin(), ok.end(), [](const LadderRung& a, const LadderRung& b) {
    return a.result.ms_per_step < b.result.ms_per_step;
  });
  return ok[ok.size() / 2];
}

// The peer's median ms/step over its runs (0: none ran); the other fields from the last run.
PeerResult median_peer(const std::vector<PeerResult>& runs) {
  PeerResult out;
  std::vector<double> ms;
  for (const PeerResult& p : runs)
    if (p.ms > 0) ms.push_back(p.ms), out = p;
  if (!ms.empty()) out.ms = median(ms);
  return out;
}

// Issue 4's CPU targets (GPT-2), stated against what was measured (never adjusted).
void report_cpu_targets(const BenchOptions& o, const std::vector<LadderRung>& rungs,
                        const std::vector<PeerResult>& torch, const ModelInfo& info, bool peer) {
  const PeerResult& torch_fp32 = torch[0];
  const PeerResult& torch_bf16 = torch[2];
  std::printf(
      "peak RSS = the resident-set high-water mark (VmHWM) of each precision's own process: parameters, "
      "gradients, optimizer state, activations, weight copies and library workspaces. model = the model's "
      "own "
      "accounting: fp32 parameters + gradients + optimizer state + GEMM weight copies + planned "
      "activations.\n");
  if (peer)
    std::printf(
        "PyTorch = bench/%s (torch %s) on the same model, batch and AdamW; bf16 = "
        "torch.autocast('cpu', torch.bfloat16) around forward + loss (peak RSS fp32 %.0f MB, bf16 %.0f "
        "MB).\n",
        info.peer_name.c_str(), torch_fp32.torch.empty() ? "?" : torch_fp32.torch.c_str(),
        torch_fp32.peak_rss_mb, torch_bf16.peak_rss_mb);
  const LadderRung& fp32 = rungs[0];
  const LadderRung& bf16 = rungs[2];
  if (is_bert(o) || !fp32.error.empty() || !bf16.error.empty()) return;
  const double s = fp32.result.ms_per_step / bf16.result.ms_per_step;
  std::printf("target bf16 >= 3x fp32: %s (%.2fx)\n", s >= 3.0 ? "met" : "NOT met", s);
  if (torch_bf16.ms > 0) {
    const double q = torch_bf16.ms / bf16.result.ms_per_step;
    std::printf("target bf16 >= 2x PyTorch bf16 autocast: %s (%.2fx)\n", q >= 2.0 ? "met" : "NOT met", q);
  }
}

// Issue 20's GPU targets (GPT-2 124M, T = 1024, bf16, one H100), for the last rung, stated against
// what was measured (never adjusted).
void report_gpu_targets(const BenchOptions& o, const LadderRung& best, double peer_ms,
                        const PeakFlops& peak) {
  if (is_bert(o) || !best.error.empty()) return;
  const BenchResult& b = best.result;
  if (peer_ms > 0) {
    const double q = peer_ms / b.ms_per_step;
    std::printf("target >= 1.5x PyTorch bf16 + SDPA + torch.compile: %s (%.2fx)\n",
                q >= 1.5 ? "met" : "NOT met", q);
  }
  std::printf("target >= 585K tokens/s (1.25x llm.c's ~468K per H100): %s (%.0fK)\n",
              b.tokens_per_s >= 585e3 ? "met" : "NOT met", b.tokens_per_s / 1e3);
  const double u = mfu(b.tflops * 1e12, peak);
  std::printf("target MFU >= 50%%: %s (%.1f%%)\n", u >= 0.5 ? "met" : "NOT met", u * 100.0);
}

}  // namespace

int bert_bench_masked_positions(int B, int T) {
  int masked = 0;
  for (int b = 0; b < B; ++b) masked += bert_row_masked(bert_row_length(b, T));
  return masked;
}

std::vector<LadderRung> run_ladder(const BenchOptions& o) {
  const QuietnessMeter meter;
  MPT_CHECK(o.steps > 0 && o.warmup >= 0, "--steps must be positive and --warmup >= 0");
  if (o.threads > 0) omp_set_num_threads(o.threads);
  const int threads = omp_get_max_threads();
  const ModelInfo info = model_info(o);  // an unknown preset or a bad --seq fails here, once
  const OptimizerKind kind = o.optimizer;
  const bool on_cuda = o.device == Device::Cuda;
  const double flops = info.flops_per_step;
  // One peak for every row, the bf16 GEMMs' (the GPU's bf16 tensor cores, or this CPU's bf16
  // kernels), so the MFU column compares rows.
  const PeakFlops peak =
      on_cuda ? gpu_peak_flops(o) : cpu_peak_flops(threads, o.peak_tflops, Precision::Bf16);
  const std::vector<RungSpec> specs = on_cuda ? gpu_rungs(o) : cpu_rungs(o);
  std::printf("%s ladder: %s, batch %d x %d, %s, %d threads, %d warmup + %d timed steps (median) per rung\n",
              on_cuda ? "GPU" : "precision", o.preset.c_str(), o.batch, o.seq, optimizer_name(o.optimizer), threads,
              o.warmup, o.steps);
  std::fflush(stdout);

  // Rounds, R times over (A B A B ...): on the CPU every precision's child, each followed by the
  // peer in that precision where it has one (fp32, bf16 autocast); on the GPU every rung, then the
  // GPU peer once (GPT-2, bf16 in its best recipe). Each row keeps the round with its median
  // ms/step, each peer the median of its rounds.
  const bool peer = o.peer && kind == OptimizerKind::AdamW;
  if (o.peer && !peer)
    std::printf("peer: skipped (bench/%s runs AdamW; no like-for-like %s peer)\n", info.peer_name.c_str(),
                optimizer_name(o.optimizer));
  const int rounds = peer ? o.rounds : 1;
  const auto cpu_peer_for = [&](const RungSpec& r) { return peer && !on_cuda && peer_has(r.precision); };
  std::vector<std::vector<LadderRung>> runs(specs.size());
  std::vector<std::vector<PeerResult>> peer_runs(specs.size());
  std::vector<double> gpu_peer_ms;
  for (int round = 0; round < rounds; ++round) {
    for (size_t i = 0; i < specs.size(); ++i) {
      const std::string which =
          rounds > 1 ? " (round " + std::to_string(round + 1) + "/" + std::to_string(rounds) + ")" : "";
      if (!o.quiet) std::printf("ladder: %s%s ...\n", specs[i].label.c_str(), which.c_str());
      std::fflush(stdout);
      runs[i].push_back(run_rung(o, threads, specs[i]));
      if (!runs[i].back().error.empty())
        std::printf("ladder: %s failed: %s\n", specs[i].label.c_str(), runs[i].back().error.c_str());
      if (cpu_peer_for(specs[i])) {
        const char* name = precision_name(specs[i].precision);
        peer_runs[i].push_back(run_peer(o, threads, info, name, false));
        if (!o.quiet && peer_runs[i].back().ms > 0)
          std::printf("  pytorch %s: %.1f ms/step\n", name, peer_runs[i].back().ms);
      }
    }
    if (peer && on_cuda) {
      const double ms = run_cuda_peer(o, info);
      if (ms > 0) gpu_peer_ms.push_back(ms);
    }
  }
  std::vector<LadderRung> rungs;
  std::vector<PeerResult> torch(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    rungs.push_back(median_rung(runs[i]));
    torch[i] = median_peer(peer_runs[i]);
  }
  if (!gpu_peer_ms.empty()) torch.back().ms = median(gpu_peer_ms);  // against the last rung: all of it on

  const double fp32_ms = rungs[0].error.empty() ? rungs[0].result.ms_per_step : 0.0;
  std::printf(
      "\n| %s | ms/step | tokens/s | TFLOP/s | MFU | %s | model (MB) | speed-up vs fp32 | PyTorch ms/step | "
      "mptrain / PyTorch |\n",
      on_cuda ? "rung" : "precision", on_cuda ? "GPU memory in use (MB)" : "peak RSS (MB)");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (size_t i = 0; i < rungs.size(); ++i) {
    const LadderRung& r = rungs[i];
    if (!r.error.empty()) {
      std::printf("| %s | failed: %s | | | | | | | | |\n", r.precision.c_str(), r.error.c_str());
      continue;
    }
    const BenchResult& b = r.result;
    char speedup[32] = "", tms[32] = "-", ratio[32] = "-";
    if (fp32_ms > 0) std::snprintf(speedup, sizeof(speedup), "%.2fx", fp32_ms / b.ms_per_step);
    if (torch[i].ms > 0) {
      std::snprintf(tms, sizeof(tms), "%.1f", torch[i].ms);
      std::snprintf(ratio, sizeof(ratio), "%.2fx", torch[i].ms / b.ms_per_step);
    }
    std::printf("| %s%s | %.1f | %.0f | %.3f | %.1f%% | %.0f | %.0f | %s | %s | %s |\n", r.precision.c_str(),
                b.skipped_steps > 0 ? " (skipped steps!)" : "", b.ms_per_step, b.tokens_per_s, b.tflops,
                mfu(b.tflops * 1e12, peak) * 100.0, on_cuda ? b.device_mb : b.peak_rss_mb, b.model_mb,
                speedup, tms, ratio);
  }
  std::printf(
      "\nTFLOP/s = %.4g model FLOPs per step (%s) / step time; MFU, every row against the "
      "bf16 peak %.3f TFLOP/s = %s.\n",
      flops, info.flops_note.c_str(), peak.tflops, peak.formula.c_str());
  if (on_cuda) {
    std::printf(
        "rungs: the vocabulary unpadded until the last (padded to a multiple of %d there); unfused = GELU "
        "and the "
        "residual add as kernels of their own; no flash = the naive attention (probabilities stored). "
        "CUDA graphs: no rung (the one-step path does not capture graphs yet). GPU memory = in use on "
        "GPU 0 after the timed steps (cudaMemGetInfo), the CUDA context included.\n",
        o.vocab_multiple);
    if (!gpu_peer_ms.empty())
      std::printf("PyTorch = %s (bf16 autocast, torch.compile, fused attention, the padded vocabulary) against "
                  "the last rung.\n",
                  is_bert(o) ? "bench/pytorch_bert.py --device cuda" : "bench/pytorch_gpt2_cuda.py");
    report_gpu_targets(o, rungs.back(), torch.back().ms, peak);
  } else {
    report_cpu_targets(o, rungs, torch, info, peer);
  }
  if (rounds > 1) std::printf("each row: the median of %d rounds, alternated with the peer's runs\n", rounds);
  report_quietness(meter.finish(),
                   std::any_of(torch.begin(), torch.end(), [](const PeerResult& t) { return t.ms > 0; }));
  std::fflush(stdout);
  return rungs;
}

std::unique_ptr<Backend> bench_backend(const BenchOptions& o) {
  return make_backend(o.device, o.threads, 0, CudaOptions{.fuse = o.cuda_fuse, .flash = o.cuda_flash});
}

void report_quietness(const Quietness& q, bool ratio) {
  std::printf("quietness: %s\n", q.describe().c_str());
  if (ratio && q.busy()) std::printf("warning: %s\n", q.warning().c_str());
}

BenchResult run_bench(const BenchOptions& o) {
  check_device(o.device, PolicyOf::Own, "bench");
  if (o.ladder) {
    const std::vector<LadderRung> rungs = run_ladder(o);
    return rungs.front().result;
  }
  MPT_CHECK(o.steps > 0 && o.warmup >= 0, "--steps must be positive and --warmup >= 0");
  if (o.threads > 0) omp_set_num_threads(o.threads);
  if (!o.data.empty()) {
    MPT_CHECK(is_bert(o), "--data: real instances are for --model bert (GPT-2's bench draws random tokens)");
    const LayoutResult l = bench_bert_layouts(o);
    BenchResult r;
    r.ms_per_step = l.ms_per_step;
    r.tokens_per_s = l.real_tokens_per_s;
    return r;
  }
  return bench_one(o);
}

}  // namespace mptrain
