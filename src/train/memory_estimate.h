// Resource limits for a training run, checked before anything large is allocated:
//  - memory: an estimate of what the run will hold (fp32 parameters, gradients, optimizer
//    state, the activation plan for one micro-batch, token buffers, a fixed allowance for the
//    runtime) against what is available (MemAvailable from /proc/meminfo, or the cgroup's
//    limit minus its usage when lower; on a GPU its free memory; or --memory-limit when given). A
//    configuration that cannot fit is refused with one line giving the estimate, the memory available and the
//    largest --batch that fits. Activations come from the model's own activation plan, built
//    without allocating, so the estimate follows every change to the model.
//  - threads: OpenMP's default is one per core the process may run on; an explicit
//    --threads may oversubscribe, but not beyond kMaxThreadsPerCore per core.
// File handles need no limit of their own: token shards are memory-mapped and their file
// descriptors closed at once (data/shard.h), checkpoint files are opened one at a time.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/param_table.h"
#include "dist/communicator.h"
#include "model/gpt2_config.h"
#include "model/llama_config.h"
#include "model/recompute.h"
#include "precision/policy.h"
#include "precision/precision.h"

namespace mptrain {

struct TrainOptions;

// Bytes a training process holds at its peak, by role.
struct MemoryEstimate {
  size_t params = 0;         // fp32 master weights
  size_t grads = 0;          // fp32 gradients; under ZeRO-2 the rank's shard and what a backward
                             // holds unreduced (zero2_gradient_floats)
  size_t lowp_grads = 0;     // a GPU plan's 16-bit gradients of a micro-batch
  size_t optimizer = 0;      // optimizer state (under ZeRO-1: this rank's shard, plus the whole
                             // state gathered on rank 0 while a checkpoint is written)
  size_t activations = 0;    // the model's activation plan for one B x T micro-batch
  size_t weight_copies = 0;  // low-precision GEMM copies of the weights (bf16, fp16, tf32)
  size_t tokens = 0;         // the micro-batch's input and target ids
  size_t runtime = 0;        // the allowance for what the run adds after the estimate (below)
  size_t process = 0;        // host memory: what the process holds already where the estimate is
                             // made (its resident set, measured); 0 for a GPU's memory
  // What the run still allocates, and the process's whole peak.
  size_t to_allocate() const {
    return params + grads + lowp_grads + optimizer + activations + weight_copies + tokens + runtime;
  }
  size_t total() const { return to_allocate() + process; }
};

// What the run adds beyond its planned buffers after the estimate: on the host, OpenMP's thread
// stacks, oneDNN's primitive cache and JIT code and the mixed-precision GEMM conversion
// workspace; the process itself (code, libraries, MPI, the tokenizer, the data's index) is
// measured instead, as MemoryEstimate::process. Peak RSS less the resident set measured just
// before the model was built, less the model's planned bytes, on this Xeon (2 threads,
// 2026-12-07): d2 B1xT8 fp32 7 MiB, d6 B8xT256 fp32 16 MiB, gpt2 B4xT256 bf16 25 MiB. On a GPU:
// cuBLASLt's workspace and cuDNN's plans in device memory (its context is outside the free
// memory the budget reads).
inline constexpr size_t kHostRuntimeAllowanceBytes = size_t{16} << 20;
inline constexpr size_t kDeviceRuntimeAllowanceBytes = size_t{64} << 20;
inline constexpr int kMaxThreadsPerCore = 4;

// What the estimate needs to know of a model (any family; train/train_task.h supplies it):
// its fp32 parameter count, the bytes of its low-precision weight copies, and its activation
// plan's bytes for a B x T micro-batch (built without allocating).
struct ModelFootprint {
  size_t num_params = 0;
  std::vector<ParamRange> grad_groups;  // gradient_groups of its table
  size_t lowp_grad_bytes = 0;  // a GPU plan's 16-bit weight gradients (model/policy_backend.h)
  size_t weight_copy_bytes = 0;
  std::function<size_t(int B, int T)> activation_bytes;
};
// The ranges of a table's gradients a backward hands one at a time (model/weight_grads.h): each
// layer's tensors (a name with a ".<index>." segment: "h.3.", "model.layers.3."), and each run of
// other tensors between them, in table order.
std::vector<ParamRange> gradient_groups(const ParamTable& table);
// The fp32 gradients rank `rank` of a ZeRO-2 run holds at most (dist/data_parallel.h): its shard of
// `partition`, and of the other ranks' pieces what a backward has written and not yet handed: the
// largest group, open for the whole backward (a tied embedding: the LM head writes it first, the
// embedding last), and one other group at a time.
size_t zero2_gradient_floats(const std::vector<ParamRange>& groups, const Partition& partition, int rank);

// The CPU backend the footprints ask what an attention keeps by default (it owns its context).
std::shared_ptr<const Backend> cpu_sizing_backend();

// GPT-2's, from its own plan and weight copies (model/gpt2.h), the attention's share as `sizing`
// (the backend the run computes on, or make_cuda_sizing_backend()) keeps it.
ModelFootprint gpt2_footprint(const Gpt2Config& config, Precision precision);
ModelFootprint gpt2_footprint(const Gpt2Config& config, const Policy& policy,
                              std::shared_ptr<const Backend> sizing = cpu_sizing_backend());
// Llama's (model/llama.h), likewise.
ModelFootprint llama_footprint(const LlamaConfig& config, const Policy& policy, std::shared_ptr<const Backend> sizing);

// The estimate for one process of a run with these options (batch, seq, optimizer, zero,
// device) on a world of `world` ranks: rank `rank`'s, or with -1 the most any rank holds (rank
// 0's gathered optimizer state and the largest ZeRO-2 gradients together); on the host its
// `process` is this process's resident set now (the trainer estimates before it builds the
// model; `explain` measures its own).
MemoryEstimate estimate_training_memory(const TrainOptions& options, const ModelFootprint& model, int world,
                                        int rank = -1);

// How much memory the run may use, and where that figure came from.
struct MemoryBudget {
  size_t bytes = 0;
  std::string source;  // "MemAvailable", "the cgroup memory limit", "--memory-limit"
  // --memory-limit bounds the whole process (MemoryEstimate::total); the detected figures are
  // what is free beside it (against MemoryEstimate::to_allocate).
  bool whole_process = false;
  // What of estimate e this budget has to hold.
  size_t charge(const MemoryEstimate& e) const { return whole_process ? e.total() : e.to_allocate(); }
};
// limit: --memory-limit's text ("" = detect). Throws Error for a malformed limit.
MemoryBudget available_memory(const std::string& limit);
// A --device cuda run's: --memory-limit when given, else the free memory of GPU `device`.
MemoryBudget gpu_memory_budget(const std::string& limit, int device);

// "2G", "1.5g", "512M", "64k", "1000000" (bytes); binary units (1G = 2^30). Throws Error.
size_t parse_memory_size(const std::string& text, const std::string& what);

// "1.23 GiB" / "456.0 MiB".
std::string format_bytes(size_t bytes);

// Throws Error when the run cannot fit: "batch 64 x 256 needs an estimated 3.1 GiB (...) but
// 2.0 GiB is available (--memory-limit); the largest batch that fits is --batch 37".
void check_memory_fits(const TrainOptions& options, const ModelFootprint& model, int world,
                       const MemoryBudget& budget);

// --batch auto: the largest micro-batch that fits the budget and divides --total-batch's
// sequences per rank, and the cheapest recompute set (choices in the order of the FLOPs they add)
// that reaches it. footprint_of(set) is the model's footprint under that set. Error (one line
// with what the smallest run needs) when not even batch 1 with the last choice fits.
struct BatchChoice {
  int batch = 0;
  RecomputeSet recompute;
  MemoryEstimate estimate;  // at that batch and set
  int without = 0;          // the largest batch keeping every activation (0: none fits)
};
BatchChoice choose_batch(const TrainOptions& options, const std::vector<RecomputeSet>& choices,
                         const std::function<ModelFootprint(RecomputeSet)>& footprint_of, int world,
                         const MemoryBudget& budget);

// The one line that says what --batch auto chose and why.
std::string describe_batch_choice(const BatchChoice& choice, const TrainOptions& options, int world,
                                  const MemoryBudget& budget);

// Cores this process may run on (its CPU affinity mask).
int available_cores();
// Throws Error when an explicit --threads exceeds kMaxThreadsPerCore per available core.
void check_thread_count(int requested);

}  // namespace mptrain
