// `mptrain bench --device cuda --model bert` (train/cuda_bench.h): BERT's model half on GPU 0
// (cuda::BertDevice: forward, the MLM + NSP losses, backward, fp32 gradients; no optimizer step
// yet), timed with the stream synchronised before and after each step, on the CPU bench's
// synthetic instances (train/bert_synthetic.h: padding, both segments, 15% masked, NSP labels).
// --ladder runs fp32, tf32, bf16 and fp16 one after another in this process, one model at a time.
// TFLOP/s counts the whole training step's model FLOPs (bert_flops_per_token: forward +
// backward; the optimizer's are negligible) and MFU is against the H100 SXM bf16 dense peak
// for every row, as the GPT-2 device bench.

#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "backend/cuda/bert_device.h"
#include "backend/cuda/context.h"
#include "backend/device.h"
#include "core/error.h"
#include "model/bert.h"
#include "model/bert_config.h"
#include "precision/precision.h"
#include "train/bert_synthetic.h"
#include "train/cuda_bench.h"

namespace mptrain {

namespace {

// One precision: warmup + timed forward_backward calls; prints its line and returns it.
BenchResult time_bert(const BenchOptions& o, const BertConfig& config, const std::vector<float>& init,
                      Precision p, int masked, double flops, double peak, cuda::Context& ctx) {
  cuda::BertDevice model(config, p, o.batch, o.seq, masked, ctx);
  model.upload_params(init.data());
  BertSynthetic data(o.batch, o.seq, config.vocab_size);
  // fp16 stores its gradients in 16 bits: a fixed scale keeps them off fp16's subnormals (there
  // is no optimizer here to skip a step or adapt it).
  const float grad_scale = p == Precision::Fp16 ? 1024.0f : 1.0f;
  std::vector<double> times;
  BenchResult r;
  for (int s = 0; s < o.warmup + o.steps; ++s) {
    data.next();
    ctx.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    const BertStats st = model.forward_backward(data.inputs(), o.batch, o.seq, grad_scale, false);
    ctx.synchronize();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!o.quiet)
      std::printf("  step %d%s: %.2f ms (MLM %.4f, NSP %.4f)\n", s + 1, s < o.warmup ? " (warmup)" : "", ms,
                  st.mlm_loss, st.nsp_loss);
    if (s >= o.warmup) times.push_back(ms);
    r.last_loss = st.loss();
  }
  const double tokens = static_cast<double>(o.batch) * o.seq;
  r.ms_per_step = median(times);
  r.tokens_per_s = tokens / (r.ms_per_step / 1e3);
  r.tflops = flops / (r.ms_per_step / 1e3) / 1e12;
  r.peak_rss_mb = cuda::device_memory_in_use_mb();
  r.model_mb = static_cast<double>(model.device_bytes()) / (1024.0 * 1024.0);
  std::printf(
      "mptrain cuda bert %s (%s attention): %.2f ms/step (forward + backward, no optimizer) | %.0f tok/s | "
      "%.2f TFLOP/s | MFU %.1f%% | GPU memory in use %.0f MB, model %.0f MB (median of %d)\n",
      precision_name(p), model.uses_flash_attention() ? "flash" : "naive", r.ms_per_step, r.tokens_per_s,
      r.tflops, 100.0 * r.tflops / peak, r.peak_rss_mb, r.model_mb, o.steps);
  if (o.result_line)
    std::printf(
        "RESULT device=cuda model=bert precision=%s ms_per_step=%.3f tokens_per_s=%.1f tflops=%.5f "
        "gpu_mem_mb=%.1f model_mb=%.1f loss=%.6f\n",
        precision_name(p), r.ms_per_step, r.tokens_per_s, r.tflops, r.peak_rss_mb, r.model_mb, r.last_loss);
  std::fflush(stdout);
  return r;
}

}  // namespace

BenchResult run_cuda_bert_bench(const BenchOptions& o) {
  MPT_CHECK(o.model == "bert", "[bench] run_cuda_bert_bench times BERT only (--model " + o.model + ")");
  MPT_CHECK(o.steps > 0 && o.warmup >= 0, "--steps must be positive and --warmup >= 0");
  MPT_CHECK(o.seq >= 8,
            "--seq " + std::to_string(o.seq) +
                " is too short for BERT's synthetic instances ([CLS] A [SEP] B [SEP] and padding): use 8 "
                "or more");
  if (cuda_device_count() == 0)
    throw Error("[bench] --device cuda: no CUDA GPU on this machine (cudaGetDeviceCount reports none)");
  const BertConfig config = bert_preset(o.preset, 30522, o.vocab_multiple);
  MPT_CHECK(o.seq <= config.max_position, "--seq " + std::to_string(o.seq) + " is longer than the model's " +
                                              std::to_string(config.max_position) + " positions");
  std::vector<Precision> precisions;
  if (o.ladder)
    precisions = {Precision::Fp32, Precision::Tf32, Precision::Bf16, Precision::Fp16};
  else
    precisions = {parse_precision(o.precision)};

  cuda::Context ctx(0);
  const ParamTable table = bert_param_table(config);
  std::vector<float> init(table.total());
  init_params(table, init.data(), 1337, config.init_std, config.init_std);  // init_weights' draw; timing only
  const int masked = bert_bench_masked_positions(o.batch, o.seq);
  const double tokens = static_cast<double>(o.batch) * o.seq;
  const double flops = bert_flops_per_token(config, o.seq, masked / tokens) * tokens;
  const double peak = o.peak_tflops > 0 ? o.peak_tflops : kH100SxmBf16DenseTflops;
  if (!o.quiet)
    std::printf(
        "bench: BERT %s (%zu params) on %s, batch %d x %d (%d masked positions), %d warmup + %d timed "
        "forward+backward passes (median); MFU against %.1f TFLOP/s (%s)\n",
        o.preset.c_str(), table.total(), ctx.info().name.c_str(), o.batch, o.seq, masked, o.warmup, o.steps,
        peak, o.peak_tflops > 0 ? "--peak-tflops" : "H100 SXM bf16 dense data-sheet peak");
  BenchResult first;
  double previous_ms = 0.0;
  for (size_t i = 0; i < precisions.size(); ++i) {
    try {
      const BenchResult r = time_bert(o, config, init, precisions[i], masked, flops, peak, ctx);
      if (o.ladder && previous_ms > 0)
        std::printf("ladder: %s is %.2fx the previous row\n", precision_name(precisions[i]),
                    previous_ms / r.ms_per_step);
      previous_ms = r.ms_per_step;
      if (i == 0) first = r;
    } catch (const std::exception& e) {
      if (!o.ladder) throw;
      std::printf("ladder: %s failed: %s\n", precision_name(precisions[i]), e.what());
      previous_ms = 0.0;
    }
  }
  return first;
}

}  // namespace mptrain
