// Memory estimate, available memory (/proc/meminfo, cgroup v1/v2, --memory-limit), the
// largest fitting batch, and the thread bound.
#include "train/memory_estimate.h"

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>

#include "backend/device.h"
#include "backend/make_backend.h"
#include "core/error.h"
#include "model/gpt2.h"
#include "model/llama.h"
#include "precision/policy.h"
#include "train/metrics.h"
#include "train/options.h"

namespace mptrain {

namespace {

// A number from a one-value file such as memory.max; nullopt for "max", a missing file or
// the "no limit" values cgroup v1 reports (close to 2^63).
std::optional<size_t> read_limit_file(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return std::nullopt;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str() || v >= (1ull << 62)) return std::nullopt;
  return static_cast<size_t>(v);
}

// MemAvailable from /proc/meminfo, in bytes (nullopt when unreadable).
std::optional<size_t> mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  size_t kb = 0;
  std::string unit;
  while (in >> key >> kb) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kb * 1024;
  }
  return std::nullopt;
}

// What the process's cgroup still allows: limit minus usage (v2, then v1). The cgroup
// mounted at /sys/fs/cgroup is the container's own in a container.
std::optional<size_t> cgroup_headroom() {
  auto headroom = [](const std::string& limit_file, const std::string& usage_file) -> std::optional<size_t> {
    const auto limit = read_limit_file(limit_file);
    if (!limit) return std::nullopt;
    const size_t usage = read_limit_file(usage_file).value_or(0);
    return *limit > usage ? *limit - usage : 0;
  };
  if (auto v2 = headroom("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current")) return v2;
  return headroom("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                  "/sys/fs/cgroup/memory/memory.usage_in_bytes");
}

std::string batch_text(int B, int T) { return std::to_string(B) + " x " + std::to_string(T); }

}  // namespace

size_t parse_memory_size(const std::string& text, const std::string& what) {
  const std::string bad = what + " '" + text + "': expected a size such as 2G, 512M or 1000000 (bytes)";
  if (text.empty()) throw Error(bad);
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !std::isfinite(v) || v <= 0) throw Error(bad);
  std::string unit(end);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.size() == 2 && (unit[1] == 'B' || unit[1] == 'I'))
    unit.pop_back();  // "GB", "Gi": binary all the same
  double scale;
  if (unit.empty() || unit == "B")
    scale = 1;
  else if (unit == "K")
    scale = 1024.0;
  else if (unit == "M")
    scale = 1024.0 * 1024;
  else if (unit == "G")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "T")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else
    throw Error(bad);
  const double bytes = v * scale;
  if (bytes < 1 || bytes > 9.0e18) throw Error(bad);
  return static_cast<size_t>(bytes);
}

std::string format_bytes(size_t bytes) {
  char buf[32];
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024)
    std::snprintf(buf, sizeof(buf), "%.2f GiB", b / (1024.0 * 1024 * 1024));
  else
    std::snprintf(buf, sizeof(buf), "%.1f MiB", b / (1024.0 * 1024));
  return buf;
}

MemoryBudget available_memory(const std::string& limit) {
  if (!limit.empty()) return {parse_memory_size(limit, "--memory-limit"), "--memory-limit", true};
  MemoryBudget budget{0, ""};
  if (const auto avail = mem_available()) budget = {*avail, "MemAvailable"};
  if (const auto cg = cgroup_headroom(); cg && (budget.source.empty() || *cg < budget.bytes))
    budget = {*cg, "the cgroup memory limit"};
  return budget;  // bytes 0, source "": nothing known (no check)
}

namespace {
// "h.3." for "h.3.mlp.c_fc.weight": the name up to its first ".<digits>." segment; "" for none.
std::string layer_of(const std::string& name) {
  for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1)) {
    size_t end = dot + 1;
    while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end]))) ++end;
    if (end > dot + 1 && end < name.size() && name[end] == '.') return name.substr(0, end + 1);
  }
  return "";
}
}  // namespace

std::vector<ParamRange> gradient_groups(const ParamTable& table) {
  std::vector<ParamRange> groups;
  std::string current;
  for (const ParamSpec& spec : table.specs()) {
    const std::string layer = layer_of(spec.name);
    if (!groups.empty() && layer == current && groups.back().end == spec.offset) {
      groups.back().end = spec.offset + spec.numel;
      continue;
    }
    groups.push_back({spec.offset, spec.offset + spec.numel});
    current = layer;
  }
  return groups;
}

size_t zero2_gradient_floats(const std::vector<ParamRange>& groups, const Partition& partition, int rank) {
  const size_t lo = partition.begin(rank), hi = partition.end(rank);
  const auto others = [&](const ParamRange& g) {
    const size_t own =
        std::max(lo, g.begin) < std::min(hi, g.end) ? std::min(hi, g.end) - std::max(lo, g.begin) : 0;
    return g.size() - own;
  };
  size_t largest = 0, open = 0, next = 0;
  for (size_t i = 0; i < groups.size(); ++i)
    if (groups[i].size() > groups[largest].size()) largest = i;
  for (size_t i = 0; i < groups.size(); ++i)
    if (i != largest) next = std::max(next, others(groups[i]));
  if (!groups.empty()) open = others(groups[largest]);
  return partition.count(rank) + open + next;
}

std::shared_ptr<const Backend> cpu_sizing_backend() { return make_backend(Device::Cpu); }

ModelFootprint gpt2_footprint(const Gpt2Config& config, Precision precision) {
  // Whether oneDNN multiplies fp16 natively is a property of the CPU; assume not (fp32
  // operands, the larger), so the estimate errs high.
  return gpt2_footprint(config, make_policy(precision, {}, BackendCaps{.fp16_gemm = false}));
}

namespace {

// A causal LM's footprint: its table, the copies its GEMM reader asks for under the policy, and
// its activation plan's bytes per (B, T).
ModelFootprint causal_lm_footprint(const ParamTable& table, GemmReaderFn reader, const Policy& policy,
                                   std::function<size_t(int, int)> activation_bytes) {
  ModelFootprint f;
  f.num_params = table.total();
  f.grad_groups = gradient_groups(table);
  f.lowp_grad_bytes = lowp_grad_floats(f.num_params, policy) * sizeof(float);
  f.weight_copy_bytes = weight_copy_bytes(table, reader, policy);
  f.activation_bytes = std::move(activation_bytes);
  return f;
}

}  // namespace

ModelFootprint gpt2_footprint(const Gpt2Config& config, const Policy& policy,
                              std::shared_ptr<const Backend> sizing) {
  // The model's own plan and weight copies (model/gpt2.h), built without allocating.
  return causal_lm_footprint(gpt2_param_table(config), gpt2_gemm_reader, policy,
                             [config, policy, be = std::move(sizing)](int B, int T) {
                               return gpt2_activation_plan(config, policy, *be, B, T).total_bytes();
                             });
}

ModelFootprint llama_footprint(const LlamaConfig& config, const Policy& policy,
                               std::shared_ptr<const Backend> sizing) {
  return causal_lm_footprint(llama_param_table(config), llama_gemm_reader(config.tie_embeddings), policy,
                             [config, policy, be = std::move(sizing)](int B, int T) {
                               return llama_activation_plan(config, policy, *be, B, T).total_bytes();
                             });
}

MemoryEstimate estimate_training_memory(const TrainOptions& o, const ModelFootprint& model, int world,
                                        int rank) {
  const size_t n = model.num_params;
  // AdamW: m, v; Sophia: m, h; Muon: its momentum and AdamW's m, v, each laid out like the
  // parameters (optim/*.h; Muon's Newton–Schulz working set, a few copies of its largest matrix,
  // is within the runtime allowance).
  const size_t states = o.optimizer == OptimizerKind::Muon ? 3 : 2;
  MemoryEstimate e;
  e.params = n * sizeof(float);
  e.grads = n * sizeof(float);
  e.lowp_grads = model.lowp_grad_bytes;
  if (o.zero == 2 && world > 1) {
    const Partition part(n, world);
    size_t floats = 0;
    for (int r = 0; r < world; ++r)
      if (rank < 0 || r == rank) floats = std::max(floats, zero2_gradient_floats(model.grad_groups, part, r));
    e.grads = floats * sizeof(float);
  }
  const size_t whole_state = states * n * sizeof(float);
  e.optimizer = whole_state;
  if (o.zero >= 1 && world > 1)  // the shard, and on rank 0 the whole state gathered for a checkpoint
    e.optimizer = whole_state / static_cast<size_t>(world) + (rank <= 0 ? whole_state : 0);
  e.activations = model.activation_bytes(o.batch, o.seq);
  e.weight_copies = model.weight_copy_bytes;
  e.tokens = 2 * static_cast<size_t>(o.batch) * o.seq * sizeof(int);
  const bool host = o.device != Device::Cuda;
  e.runtime = host ? kHostRuntimeAllowanceBytes : kDeviceRuntimeAllowanceBytes;
  e.process = host ? resident_bytes() : 0;
  return e;
}

MemoryBudget gpu_memory_budget(const std::string& limit, int device) {
  if (!limit.empty()) return {parse_memory_size(limit, "--memory-limit"), "--memory-limit", true};
  const DeviceMemoryInfo info = cuda_memory_info(device);
  return {info.free, "free memory of GPU " + std::to_string(device) + ", " + cuda_device_name(device)};
}

void check_memory_fits(const TrainOptions& o, const ModelFootprint& model, int world,
                       const MemoryBudget& budget) {
  if (budget.bytes == 0) return;  // nothing to check against (no /proc, no cgroup, no limit)
  const MemoryEstimate e = estimate_training_memory(o, model, world);
  if (budget.charge(e) <= budget.bytes) return;

  // The largest micro-batch that fits (the estimate grows with B), and one that also divides
  // --total-batch when it was given.
  auto fits = [&](int B) {
    TrainOptions trial = o;
    trial.batch = B;
    return budget.charge(estimate_training_memory(trial, model, world)) <= budget.bytes;
  };
  int lo = 0, hi = o.batch - 1;  // lo fits (0: nothing does), hi + 1 does not
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    if (fits(mid))
      lo = mid;
    else
      hi = mid - 1;
  }
  if (lo > 0 && o.total_batch_tokens > 0)
    while (lo > 0 && o.total_batch_tokens % (static_cast<int64_t>(lo) * o.seq * world) != 0) --lo;

  std::string msg =
      "batch " + batch_text(o.batch, o.seq) + " needs an estimated " + format_bytes(budget.charge(e)) +
      (budget.whole_process ? "" : " more") + " (parameters " + format_bytes(e.params) + ", gradients " +
      format_bytes(e.grads + e.lowp_grads) + ", optimizer state " + format_bytes(e.optimizer) +
      ", activations " + format_bytes(e.activations) +
      (e.weight_copies ? ", weight copies " + format_bytes(e.weight_copies) : std::string()) +
      ", token buffers " + format_bytes(e.tokens) + ", runtime " + format_bytes(e.runtime) +
      (budget.whole_process && e.process ? ", this process now " + format_bytes(e.process) : std::string()) +
      ") but " + format_bytes(budget.bytes) + " is available (" + budget.source + ")";
  if (lo > 0)
    msg += "; the largest batch that fits is --batch " + std::to_string(lo) +
           (o.total_batch_tokens > 0
                ? " (a divisor of --total-batch " + std::to_string(o.total_batch_tokens) + ")"
                : "");
  else
    msg += "; even --batch 1 does not fit: use a smaller model or a shorter --seq";
  throw Error(msg);
}

BatchChoice choose_batch(const TrainOptions& o, const std::vector<RecomputeSet>& choices,
                         const std::function<ModelFootprint(RecomputeSet)>& footprint_of, int world,
                         const MemoryBudget& budget) {
  MPT_CHECK(o.total_batch_tokens > 0,
            "--batch auto splits --total-batch into micro-batches: give --total-batch (tokens per optimizer step)");
  const int64_t per_micro = static_cast<int64_t>(o.seq) * world;
  MPT_CHECK(o.total_batch_tokens % per_micro == 0,
            "--total-batch " + std::to_string(o.total_batch_tokens) + " is not a multiple of seq x ranks = " +
                std::to_string(per_micro));
  const int64_t sequences = o.total_batch_tokens / per_micro;  // a micro-batch divides these
  BatchChoice best;
  MemoryEstimate smallest;  // batch 1 under the last choice, for the refusal
  for (size_t c = 0; c < choices.size(); ++c) {
    const ModelFootprint model = footprint_of(choices[c]);
    TrainOptions trial = o;
    int fitting = 0;
    MemoryEstimate at;
    // The divisors of `sequences` from the largest; budget 0 (nothing known) takes the largest.
    for (int64_t b = sequences; b >= 1 && fitting == 0; --b) {
      if (sequences % b != 0 || b > (1 << 20)) continue;
      trial.batch = static_cast<int>(b);
      const MemoryEstimate e = estimate_training_memory(trial, model, world);
      if (budget.bytes == 0 || budget.charge(e) <= budget.bytes) fitting = trial.batch, at = e;
    }
    if (c == 0) best.without = fitting;
    if (c + 1 == choices.size() && fitting == 0) {
      trial.batch = 1;
      smallest = estimate_training_memory(trial, model, world);
    }
    if (fitting > best.batch) best = {fitting, choices[c], at, best.without};
  }
  if (best.batch == 0)
    throw Error("--batch auto: even batch 1 x " + std::to_string(o.seq) + " with --recompute " +
                recompute_name(choices.back()) + " needs an estimated " +
                format_bytes(budget.charge(smallest)) + " but " + format_bytes(budget.bytes) +
                " is available (" + budget.source + "); use a smaller model or a shorter --seq");
  return best;
}

std::string describe_batch_choice(const BatchChoice& c, const TrainOptions& o, int world, const MemoryBudget& budget) {
  const std::string room = budget.bytes ? format_bytes(budget.bytes) + " (" + budget.source + ")" : "no known limit";
  const long long sequences = o.total_batch_tokens / (static_cast<int64_t>(o.seq) * world);
  return "batch auto: micro-batch " + std::to_string(c.batch) + " with --recompute " +
         recompute_name(c.recompute) + ", the largest dividing --total-batch's " + std::to_string(sequences) +
         " sequences per rank that fits " + room + ", estimated " + format_bytes(budget.charge(c.estimate)) +
         "; keeping every activation: " +
         (c.without > 0 ? "batch " + std::to_string(c.without) : "no batch fits");
}

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return 1;
}

void check_thread_count(int requested) {
  const int cores = available_cores();
  MPT_CHECK(requested <= kMaxThreadsPerCore * cores,
            "--threads " + std::to_string(requested) + " is more than " + std::to_string(kMaxThreadsPerCore) +
                " per core on the " + std::to_string(cores) + " core(s) this process may use (at most " +
                std::to_string(kMaxThreadsPerCore * cores) + ")");
}

}  // namespace mptrain
