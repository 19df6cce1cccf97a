// `mptrain bench`: training-step throughput with a PyTorch peer in the same run.
#include <CLI/CLI.hpp>
#include <memory>

#include "bench/bench.h"
#include "cli/llama_options.h"
#include "cli/subcommands.h"
#include "cli/validators.h"
#include "core/error.h"
#include "precision/precision.h"

namespace mptrain {

void register_bench(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "bench", "Time GPT-2, Llama or BERT training steps (and PyTorch on the same work); --ladder: every precision");
  auto o = std::make_shared<BenchOptions>();
  cli::add_named_option(cmd, "--model", &o->model, parse_model_family, "{gpt2,llama,bert}",
                        "Model family: gpt2 (random tokens), llama (random tokens; no PyTorch peer) or bert "
                        "(BertForPreTraining on synthetic masked instances)",
                        model_family_name(o->model));
  cli::add_named_option(
      cmd, "--device", &o->device,
      [](const std::string& s) { return parse_named_device(s, "a timing names where it ran"); },
      "{cpu,cuda}",
      "Where the steps run: cpu, or cuda (GPU 0: the same model and training step on the CUDA backend, with "
      "the PyTorch GPU peer for GPT-2)",
      device_name(o->device));
  cmd->add_option("--preset", o->preset,
                  "Preset (default: gpt2, or llama-mini with --model llama, or bert-base with --model bert)")
      ->capture_default_str();
  add_llama_block_options(cmd, &o->llama_block);
  cmd->add_option("--vocab-multiple", o->vocab_multiple,
                  "Pad the vocabulary to a multiple of this (BERT default: 64)")
      ->capture_default_str()
      ->check(cli::at_least(1));
  cmd->add_option("-b,--batch", o->batch)->capture_default_str()->check(cli::at_least(1));
  cmd->add_option("-t,--seq", o->seq)->capture_default_str()->check(cli::at_least(1));
  cmd->add_option("--steps", o->steps, "Timed steps")->capture_default_str()->check(cli::at_least(1));
  cmd->add_option("--warmup", o->warmup, "Untimed steps before timing")
      ->capture_default_str()
      ->check(cli::at_least(0));
  cmd->add_option("--threads", o->threads, "CPU threads (0 = all)")
      ->capture_default_str()
      ->check(cli::at_least(0));
  cli::add_named_option(cmd, "--optimizer", &o->optimizer, parse_optimizer_kind, "{adamw,sophia,muon}",
                        "Optimizer: adamw, sophia (its Hessian steps are part of the timing) or muon (its "
                        "Newton-Schulz iterations are)",
                        optimizer_name(o->optimizer));
  cli::add_named_option(cmd, "--muon-qkv", &o->muon_qkv, parse_muon_qkv, "{three,one}",
                        "Muon: attention's q, k, v weights as three matrices or one", muon_qkv_name(o->muon_qkv));
  cli::add_precision_option(cmd, &o->precision,
                            "Precision: fp32, tf32, bf16 or fp16 (the peer runs fp32 or bf16 autocast)");
  cmd->add_flag(
      "--ladder", o->ladder,
      "Time every precision (fp32, tf32, bf16, fp16) on the same work, each in its own process, and the "
      "PyTorch peer in fp32 and bf16; print one table. With --device cuda: fp32, TF32, bf16, fused "
      "epilogues, flash attention, padded vocabulary, CUDA graphs, against the GPU peer");
  // Used by the ladder for its child runs (not in --help).
  cmd->add_flag("--result-line", o->result_line)->group("");
  cmd->add_flag("!--cuda-unfused", o->cuda_fuse)->group("");
  cmd->add_flag("!--cuda-no-flash", o->cuda_flash)->group("");
  cmd->add_flag(
      "--graphs", o->graphs,
      "Replay each step's forward and backward from a graph (GPT-2; CUDA graphs with --device cuda); "
      "needs --warmup 2");
  cli::add_named_option(cmd, "--recompute", &o->recompute, parse_recompute, kRecomputeOptionText,
                        "What the backward recomputes (none, or a comma list of gelu, norm, attention, mlp, "
                        "block; GPT-2; Llama without gelu; BERT gelu, attention, mlp): "
                        "the step's time and peak memory with it",
                        "none");
  cmd->add_flag("!--no-peer", o->peer, "Skip the PyTorch comparison");
  cmd->add_flag("--profile", o->profile,
                "Time every op of the timed steps and print where the step goes: each GEMM shape against the "
                "FLOP/s peak, every other op against the measured memory bandwidth (no peer; on a GPU each "
                "op is waited for, so the profiled step is slower than a plain one)");
  cmd->add_option("--rounds", o->rounds,
                  "Alternating rounds of mptrain and the peer (A B A B ...); each side's median is compared")
      ->capture_default_str()
      ->check(cli::at_least(1));
  cli::add_named_option(cmd, "--progress", &o->progress, parse_progress_mode, "{auto,bar,lines,none}",
                        "Progress display: auto, bar, lines or none", "auto");
  cmd->add_flag("-q,--quiet", o->quiet, "Print only the results");
  cmd->add_option("--peak-tflops", o->peak_tflops, "Peak TFLOP/s for MFU (default: an estimate for this CPU)")
      ->check(cli::at_least(0));
  cmd->add_option("--data", o->data,
                  "BERT: time steps on this instance file ('prepare --task bert') instead of synthetic "
                  "instances, padded against unpadded batches (real tokens/s)");
  cmd->add_option("--batch-layout", o->batch_layout,
                  "With --data: padded, unpadded, or both (alternating rounds on the same batches)")
      ->capture_default_str()
      ->check(CLI::IsMember({"padded", "unpadded", "both"}));
  cmd->add_option("--python", o->python, "Python interpreter with torch for the peer")->capture_default_str();
  cmd->add_option("--peer-script", o->peer_script,
                  "Path of the peer (default bench/pytorch_gpt2.py or pytorch_bert.py)");
  cmd->callback([cmd, o, &exit_code]() {
    if (o->model == ModelFamily::Llama && cmd->count("--preset") == 0) o->preset = "llama-mini";
    check_llama_block_options(cmd, model_family_name(o->model));
    MPT_CHECK(o->model != ModelFamily::Llama || !o->ladder,
              "--ladder compares against GPT-2's PyTorch peers: --model gpt2");
    if (o->model == ModelFamily::Bert) {  // BERT's own defaults where the GPT-2 ones were left in place
      if (cmd->count("--preset") == 0) o->preset = "bert-base";
      if (cmd->count("--vocab-multiple") == 0) o->vocab_multiple = 64;
    }
    MPT_CHECK(!o->ladder || cmd->count("--precision") == 0,
              "--ladder runs every precision; drop --precision (or drop --ladder to time one)");
    MPT_CHECK(!o->profile || !o->ladder, "--profile times one precision; drop --ladder");
    MPT_CHECK(!o->profile || o->data.empty(), "--profile times synthetic steps; drop --data");
    MPT_CHECK(!o->profile || !o->graphs,
              "--profile times each op as it runs; a graph replays them unseen: drop --graphs");
    run_bench(*o);
    exit_code = 0;
  });
}

}  // namespace mptrain
