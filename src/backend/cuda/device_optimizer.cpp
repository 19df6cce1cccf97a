// cuda::DeviceOptimizer (device_optimizer.h): the optimizer step of train/step.cpp over the
// segments of a flat parameter table, with the launchers of adamw.h, sophia.h, grad_norm.h and
// loss_scale.h (one launch per segment and kernel).
#include "backend/cuda/device_optimizer.h"

#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "backend/cuda/adamw.h"
#include "backend/cuda/grad_norm.h"
#include "backend/cuda/loss_scale.h"
#include "backend/cuda/sophia.h"
#include "core/error.h"
#include "dist/data_parallel.h"
#include "optim/grad_norm.h"

namespace mptrain::cuda {

namespace {

// Packed state offsets: a multiple of 64 floats keeps each segment's mask on a word boundary
// (32 bits a word) and its float4 groups 16-byte aligned.
constexpr size_t kStateAlign = 64;
// Segment starts in the flat table: 16 elements keep fp32 (64 B) and 16-bit (32 B) pointers
// aligned for the vectorised kernels.
constexpr size_t kSegmentAlign = 16;

size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

std::string range_text(const FlatRange& r) {
  return "[" + std::to_string(r.begin) + ", " + std::to_string(r.end) + ")";
}

// Adds [begin, end) to ranges, merged with the last one when they touch.
void append_merged(std::vector<FlatRange>& ranges, size_t begin, size_t end) {
  if (begin == end) return;
  if (!ranges.empty() && ranges.back().end == begin)
    ranges.back().end = end;
  else
    ranges.push_back({begin, end});
}

}  // namespace

DeviceOptimizerConfig device_optimizer_config(const Optimizer& host) {
  DeviceOptimizerConfig c;
  c.kind = host.kind();
  if (const auto* a = dynamic_cast<const AdamW*>(&host)) {
    c.adamw = a->hyper();
  } else if (const auto* s = dynamic_cast<const Sophia*>(&host)) {
    c.sophia = s->hyper();
    c.tokens_per_step = s->tokens_per_step();
    c.seed = s->curvature_seed();
  } else {
    throw Error(std::string("[cuda optimizer] no GPU version of optimizer '") + host.name() + "'");
  }
  return c;
}

DeviceOptimizer::DeviceOptimizer(const ParamTable& table, const DeviceOptimizerConfig& config, Context& ctx,
                                 std::vector<FlatRange> segments)
    : table_(table), config_(config), ctx_(ctx) {
  if (segments.empty()) segments.push_back({0, table.total()});
  if (config_.kind == OptimizerKind::Sophia) {
    validate(config_.sophia);
    MPT_CHECK(config_.tokens_per_step > 0.0, "[cuda optimizer] Sophia needs positive tokens per step");
  }
  // Segments: ascending, disjoint, aligned; the state packed; decay and real coordinates from
  // dist's shard table of each (the rules the CPU's ZeRO-1 shard optimizer follows).
  std::vector<std::pair<size_t, size_t>> decayed;  // in packed-state coordinates
  size_t prev_end = 0;
  for (const FlatRange& r : segments) {
    // An empty segment needs no alignment: a ZeRO-1 rank past the last shard gets
    // [total, total), and total need not be a multiple of 16.
    MPT_CHECK(r.begin <= r.end && r.end <= table.total() && r.begin >= prev_end &&
                  (r.size() == 0 || r.begin % kSegmentAlign == 0),
              "[cuda optimizer] bad segment " + range_text(r) + " of " + std::to_string(table.total()) +
                  " parameters (ascending, disjoint, starts a multiple of " + std::to_string(kSegmentAlign) + ")");
    prev_end = r.end;
    if (r.size() == 0) continue;
    Segment seg;
    seg.range = r;
    seg.state = state_size_;
    const ParamTable pieces = shard_param_table(table, r.begin, r.end);
    for (const ParamSpec& piece : pieces.specs()) {
      if (piece.decay) decayed.emplace_back(seg.state + piece.offset, seg.state + piece.offset + piece.numel);
      // The real elements are the piece's prefix (vocabulary padding trails a tensor).
      append_merged(seg.real, r.begin + piece.offset, r.begin + piece.offset + piece.hf_numel());
    }
    state_size_ = round_up(state_size_ + r.size(), kStateAlign);
    segments_vec_.push_back(std::move(seg));
    segments_.push_back(r);
  }
  state_ = DeviceMemory(std::max<size_t>(1, roles() * state_size_) * sizeof(float));
  const std::vector<uint32_t> host_mask = adamw_decay_mask(state_size_, decayed);
  mask_ = DeviceMemory(std::max<size_t>(1, host_mask.size()) * sizeof(uint32_t));
  if (!host_mask.empty()) copy_to_device(mask_.get(), host_mask.data(), host_mask.size() * sizeof(uint32_t), ctx_);
  // Device scalars, 256-byte aligned each: norm scratch, one norm per segment, clip factor,
  // overflow flag, unclipped count.
  size_t at = 0;
  const auto take = [&at](size_t bytes) {
    const size_t o = at;
    at += round_up(bytes, 256);
    return o;
  };
  norm_scratch_ = take(grad_norm_scratch_doubles() * sizeof(double));
  norms_ = take(std::max<size_t>(1, segments_vec_.size()) * sizeof(double));
  clip_ = take(sizeof(float));
  found_inf_ = take(sizeof(int));
  count_ = take(sizeof(unsigned long long));
  scalars_ = DeviceMemory(at);
  zero_state();
}

DeviceOptimizer::~DeviceOptimizer() = default;

void DeviceOptimizer::bind(float* params, float* grads, void* lowp, StorageType lowp_type) {
  MPT_CHECK(params != nullptr && grads != nullptr, "[cuda optimizer] bind needs parameter and gradient buffers");
  MPT_CHECK(lowp == nullptr || lowp_type == StorageType::BF16 || lowp_type == StorageType::F16,
            "[cuda optimizer] the parameter copy must be bf16 or fp16");
  params_ = params;
  grads_ = grads;
  lowp_ = lowp;
  lowp_type_ = lowp_type;
}

size_t DeviceOptimizer::device_bytes() const { return state_.bytes() + mask_.bytes() + scalars_.bytes(); }

float* DeviceOptimizer::role(int r) const { return static_cast<float*>(state_.get()) + r * state_size_; }

float DeviceOptimizer::rho_b() const {
  return static_cast<float>(static_cast<double>(config_.sophia.rho) * config_.tokens_per_step);  // as Sophia::rho_b
}

bool DeviceOptimizer::curvature_due(int64_t t) const {
  return config_.kind == OptimizerKind::Sophia && t % config_.sophia.k == 0;
}

template <class U>
static U* at_bytes(const DeviceMemory& mem, size_t offset) {
  return reinterpret_cast<U*>(static_cast<char*>(mem.get()) + offset);
}

bool DeviceOptimizer::unscale_and_check_overflow(float scale) {
  int* found = at_bytes<int>(scalars_, found_inf_);
  fill_bytes(found, 0, sizeof(int), ctx_);
  for (const Segment& s : segments_vec_) unscale_and_check(grads_ + s.range.begin, s.range.size(), scale, found, ctx_);
  int host = 0;
  copy_to_host(&host, found, sizeof(int), ctx_);
  const bool overflow = host != 0;
  return reducer_.any ? reducer_.any(overflow) : overflow;  // every rank skips, or none
}

double DeviceOptimizer::gradient_norm() {
  double* norms = at_bytes<double>(scalars_, norms_);
  double* scratch = at_bytes<double>(scalars_, norm_scratch_);
  const size_t k = segments_vec_.size();
  for (size_t i = 0; i < k; ++i) {
    const Segment& s = segments_vec_[i];
    grad_norm(norms + i, nullptr, grads_ + s.range.begin, s.range.size(), 0.0f, scratch, ctx_);
  }
  std::vector<double> host(k);
  if (k) copy_to_host(host.data(), norms, k * sizeof(double), ctx_);
  // One segment, one process: the device's norm as it is (no square and root round trip).
  if (k == 1 && !reducer_.sum) return host[0];
  double squares = 0.0;
  for (double x : host) squares += x * x;
  if (reducer_.sum) squares = reducer_.sum(squares);
  return std::sqrt(squares);
}

void DeviceOptimizer::upload_clip(float clip) { copy_to_device(at_bytes<float>(scalars_, clip_), &clip, sizeof(float), ctx_); }

void DeviceOptimizer::update(float lr, int64_t t, const int* skip) {
  MPT_CHECK(params_ != nullptr, "[cuda optimizer] step before bind");
  const float* clip = at_bytes<float>(scalars_, clip_);
  const size_t es = lowp_ ? storage_bytes(lowp_type_) : 0;
  const auto* mask = static_cast<const uint32_t*>(mask_.get());
  for (const Segment& s : segments_vec_) {
    const size_t b = s.range.begin, n = s.range.size();
    void* lowp = lowp_ ? static_cast<char*>(lowp_) + b * es : nullptr;
    const uint32_t* seg_mask = mask + s.state / 32;
    if (config_.kind == OptimizerKind::AdamW) {
      AdamWArgs a;
      a.lr = lr;
      a.beta1 = config_.adamw.beta1;
      a.beta2 = config_.adamw.beta2;
      a.eps = config_.adamw.eps;
      a.weight_decay = config_.adamw.weight_decay;
      a.t = t;
      a.grad_scale = clip;
      a.skip = skip;
      adamw_update(params_ + b, grads_ + b, role(0) + s.state, role(1) + s.state, seg_mask, n, a, lowp, lowp_type_,
                   ctx_);
    } else {
      SophiaArgs a;
      a.lr = lr;
      a.beta1 = config_.sophia.beta1;
      a.rho_b = rho_b();
      a.weight_decay = config_.sophia.weight_decay;
      a.grad_scale = clip;
      a.skip = skip;
      sophia_update(params_ + b, grads_ + b, role(0) + s.state, role(1) + s.state, seg_mask, n, a, lowp, lowp_type_,
                    ctx_);
    }
  }
}

bool DeviceOptimizer::step(float lr, float grad_clip, int64_t t) {
  MPT_CHECK(segments_vec_.size() == 1 && !reducer_.sum,
            "[cuda optimizer] the unguarded step is for one process over one segment");
  const Segment& s = segments_vec_[0];
  int* found = at_bytes<int>(scalars_, found_inf_);
  if (scaler_) {
    fill_bytes(found, 0, sizeof(int), ctx_);
    unscale_and_check(grads_ + s.range.begin, s.range.size(), scaler_->scale(), found, ctx_);
  }
  grad_norm(at_bytes<double>(scalars_, norms_), at_bytes<float>(scalars_, clip_), grads_ + s.range.begin,
            s.range.size(), grad_clip, at_bytes<double>(scalars_, norm_scratch_), ctx_);
  update(lr, t, scaler_ ? found : nullptr);
  norm_on_device_ = true;
  if (!scaler_) return true;
  int host = 0;
  copy_to_host(&host, found, sizeof(int), ctx_);
  scaler_->update(host != 0);
  return host == 0;
}

double DeviceOptimizer::last_grad_norm() {
  if (norm_on_device_) {
    copy_to_host(&last_norm_, at_bytes<double>(scalars_, norms_), sizeof(double), ctx_);
    norm_on_device_ = false;
  }
  return last_norm_;
}

DeviceOptimizer::GuardedStep DeviceOptimizer::guarded_step(float loss, float lr, float grad_clip, int64_t t) {
  GuardedStep r;
  norm_on_device_ = false;
  if (scaler_) {  // train/step.cpp: unscale, check, update the scale; a hit skips the step
    const bool overflow = unscale_and_check_overflow(scaler_->scale());
    scaler_->update(overflow);
    if (overflow) {
      r.skipped = true;
      r.grad_norm = last_norm_ = std::numeric_limits<double>::infinity();
      return r;
    }
  }
  r.grad_norm = last_norm_ = gradient_norm();
  if (!std::isfinite(r.grad_norm) || !std::isfinite(loss)) {  // the numeric guard: no update
    r.non_finite = true;
    return r;
  }
  upload_clip(clip_coefficient(r.grad_norm, grad_clip));
  update(lr, t, nullptr);
  return r;
}

DeviceOptimizer::Curvature DeviceOptimizer::update_curvature(float grad_clip) {
  MPT_CHECK(config_.kind == OptimizerKind::Sophia, "[cuda optimizer] only Sophia makes curvature estimates");
  Curvature c;
  // As train/step.cpp: an overflow drops the estimate without touching the scale.
  if (scaler_ && unscale_and_check_overflow(scaler_->scale())) return c;
  c.norm = gradient_norm();
  if (!std::isfinite(c.norm)) return c;  // the numeric guard's rule: a non-finite estimate is dropped
  upload_clip(clip_coefficient(c.norm, grad_clip));
  const float* clip = at_bytes<float>(scalars_, clip_);
  for (const Segment& s : segments_vec_)
    sophia_hessian_update(role(1) + s.state, grads_ + s.range.begin, s.range.size(), config_.sophia.beta2, clip,
                          nullptr, ctx_);
  ++hessian_updates_;
  c.win_rate = win_rate();
  c.made = true;
  return c;
}

double DeviceOptimizer::win_rate() {
  auto* count = at_bytes<unsigned long long>(scalars_, count_);
  fill_bytes(count, 0, sizeof(unsigned long long), ctx_);
  double total = 0.0;
  for (const Segment& s : segments_vec_) {
    for (const FlatRange& r : s.real) {
      const size_t o = s.state + (r.begin - s.range.begin);
      sophia_unclipped_count(count, role(0) + o, role(1) + o, r.size(), rho_b(), true, ctx_);
      total += static_cast<double>(r.size());
    }
  }
  unsigned long long host = 0;
  copy_to_host(&host, count, sizeof(host), ctx_);
  double unclipped = static_cast<double>(host);
  if (reducer_.sum) {
    unclipped = reducer_.sum(unclipped);
    total = reducer_.sum(total);
  }
  return total > 0.0 ? unclipped / total : 0.0;
}

void DeviceOptimizer::zero_state() {
  fill_bytes(state_.get(), 0, state_.bytes(), ctx_);
  ctx_.synchronize();
}

void DeviceOptimizer::upload_state(const std::vector<const float*>& host, size_t host_begin) {
  MPT_CHECK(host.size() == roles(), "[cuda optimizer] expected " + std::to_string(roles()) + " state arrays");
  for (size_t r = 0; r < roles(); ++r)
    for (const Segment& s : segments_vec_)
      copy_to_device(role(static_cast<int>(r)) + s.state, host[r] + (s.range.begin - host_begin),
                     s.range.size() * sizeof(float), ctx_);
}

void DeviceOptimizer::download_state(const std::vector<float*>& host, size_t host_begin) {
  MPT_CHECK(host.size() == roles(), "[cuda optimizer] expected " + std::to_string(roles()) + " state arrays");
  for (size_t r = 0; r < roles(); ++r)
    for (const Segment& s : segments_vec_)
      copy_to_host(host[r] + (s.range.begin - host_begin), role(static_cast<int>(r)) + s.state,
                   s.range.size() * sizeof(float), ctx_);
}

size_t DeviceOptimizer::host_begin_of(const Optimizer& host) const {
  MPT_CHECK(host.kind() == config_.kind, std::string("[cuda optimizer] state of a ") + host.name() +
                                             " optimizer given to " + optimizer_name(config_.kind));
  MPT_CHECK(host.state().size() == roles(), "[cuda optimizer] the host optimizer has an unexpected state layout");
  const size_t size = host.state()[0].buffer.size();
  for (const OptimizerState& s : host.state())
    MPT_CHECK(s.buffer.size() == size, "[cuda optimizer] the host optimizer's state buffers differ in size");
  if (size == table_.total()) return 0;
  if (size == 0 && segments_vec_.empty()) return 0;  // a ZeRO-1 rank whose shard is empty
  MPT_CHECK(segments_vec_.size() == 1 && size == segments_vec_[0].range.size(),
            "[cuda optimizer] host state of " + std::to_string(size) + " values covers neither the table (" +
                std::to_string(table_.total()) + ") nor this optimizer's one segment");
  return segments_vec_[0].range.begin;
}

void DeviceOptimizer::upload_state(const Optimizer& host) {
  const size_t begin = host_begin_of(host);
  std::vector<const float*> roles_host;
  for (const OptimizerState& s : host.state()) roles_host.push_back(s.buffer.data());
  upload_state(roles_host, begin);
  hessian_updates_ = host.curvature_counter();  // Sophia's label RNG counter (0 for AdamW)
}

void DeviceOptimizer::download_state(Optimizer& host) {
  const size_t begin = host_begin_of(host);
  std::vector<float*> roles_host;
  for (OptimizerState& s : host.state()) roles_host.push_back(s.buffer.data());
  download_state(roles_host, begin);
  if (config_.kind == OptimizerKind::Sophia)
    host.set_scalar_state({{"hessian_updates", std::to_string(hessian_updates_)}});
}

}  // namespace mptrain::cuda
