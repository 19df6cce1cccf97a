// Activation plan bookkeeping.
#include "model/activation_plan.h"

#include <string>

#include "core/error.h"

namespace mptrain {

void check_batch_shape(int B, int T, int block_size) {
  MPT_CHECK(B > 0 && T > 0, "batch size and sequence length must be positive");
  MPT_CHECK(T <= block_size, "sequence length " + std::to_string(T) + " is longer than the model's context (" +
                                 std::to_string(block_size) + " positions)");
}

ActivationPlan::Handle ActivationPlan::add(std::string name, size_t numel, StorageType type, OpRole op,
                                           Role role) {
  entries_.push_back({std::move(name), total_, numel, type, op, role});
  total_ += (numel * storage_bytes(type) + 63) / 64 * 64;
  return entries_.size() - 1;
}

ActivationPlan::Handle LayerTensors::add(bool shared, const std::string& prefix, const std::string& name,
                                         size_t numel, StorageType type, OpRole op) {
  if (!shared) return plan_.add(prefix + name, numel, type, op, ActivationPlan::Role::Saved);
  const auto [it, added] = shared_.try_emplace(name, ActivationPlan::kNone);
  if (added) it->second = plan_.add("recomputed_" + name, numel, type, op, ActivationPlan::Role::Scratch);
  return it->second;
}

void ActivationPlan::allocate(MemoryResource& memory) { buffer_.resize(total_ / sizeof(float), memory); }

const float* ActivationPlan::read_f32(Handle h, size_t n, Backend& be, FloatBuffer& host) {
  MPT_CHECK(n <= entries_[h].numel,
            "activation '" + entries_[h].name + "' has fewer than " + std::to_string(n) + " values");
  const bool visible = buffer_.memory().host_visible();
  if (type(h) == StorageType::F32 && visible) return get(h);
  if (host.size() < n) host.resize(n);
  const auto count = static_cast<std::int64_t>(n);
  const View entry = View::of(raw(h), type(h), {count}), out = View::f32(host.data(), {count});
  if (visible) {
    be.cast(out, entry);
  } else if (type(h) == StorageType::F32) {
    be.download(host.data(), entry);
  } else {
    if (widened_.size() < n) widened_.resize(n, buffer_.memory());
    const View wide = View::f32(widened_.data(), {count});
    be.cast(wide, entry);
    be.download(host.data(), wide);
  }
  return host.data();
}

float* ActivationPlan::get(Handle h) {
  const Entry& e = entries_[h];
  MPT_CHECK(e.type == StorageType::F32,
            "activation '" + e.name + "' is " + storage_name(e.type) + ", not fp32 (use raw())");
  return reinterpret_cast<float*>(reinterpret_cast<char*>(buffer_.data()) + e.offset);
}

size_t ActivationPlan::bytes(Role role) const {
  size_t sum = 0;
  for (const Entry& e : entries_)
    if (e.role == role) sum += e.bytes();
  return sum;
}

}  // namespace mptrain
