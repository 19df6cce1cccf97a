// Parameter table bookkeeping.
#include "core/param_table.h"

#include <algorithm>

#include "core/error.h"
#include "core/rng.h"

namespace mptrain {

namespace {
size_t product(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}
}  // namespace

size_t ParamSpec::hf_numel() const { return product(hf_shape); }

void ParamTable::add(std::string name, std::vector<int64_t> shape, InitRule init, bool decay,
                     std::vector<int64_t> hf_shape) {
  ParamSpec spec;
  spec.name = std::move(name);
  spec.hf_shape = hf_shape.empty() ? shape : std::move(hf_shape);
  spec.shape = std::move(shape);
  spec.init = init;
  spec.decay = decay;
  spec.offset = total_;
  spec.numel = product(spec.shape);
  total_ += spec.numel;
  specs_.push_back(std::move(spec));
}

void ParamTable::add_matrix(std::string name, std::vector<int64_t> shape, InitRule init, MatrixLayout layout,
                            QkvRole qkv) {
  MPT_CHECK(shape.size() == 2 && layout != MatrixLayout::None, "[param table] " + name + " is not a matrix");
  add(std::move(name), std::move(shape), init, true);
  mark_matrix(layout, qkv);
}

void ParamTable::mark_matrix(MatrixLayout layout, QkvRole qkv) {
  MPT_CHECK(!specs_.empty(), "[param table] no tensor to mark as a matrix");
  specs_.back().matrix = layout;
  specs_.back().qkv = qkv;
}

const ParamSpec& ParamTable::get(const std::string& name) const {
  for (const auto& s : specs_)
    if (s.name == name) return s;
  throw Error("no parameter named '" + name + "'");
}

bool ParamTable::has(const std::string& name) const {
  return std::any_of(specs_.begin(), specs_.end(), [&](const ParamSpec& s) { return s.name == name; });
}

ParamRange ParamTable::range(const std::string& prefix) const {
  ParamRange r;
  bool found = false, ended = false;
  for (const auto& s : specs_) {
    const bool in = s.name.rfind(prefix, 0) == 0;
    MPT_CHECK(!(in && ended), "the parameters named '" + prefix + "*' are not consecutive in the table");
    if (in && !found) r.begin = s.offset;
    if (in) r.end = s.offset + s.numel;
    ended = ended || (found && !in);
    found = found || in;
  }
  MPT_CHECK(found, "no parameter named '" + prefix + "*'");
  return r;
}

void init_params(const ParamTable& table, float* params, uint64_t seed, float std, float residual_std) {
  const auto& specs = table.specs();
  for (size_t s = 0; s < specs.size(); ++s) {
    const ParamSpec& spec = specs[s];
    float* p = params + spec.offset;
    const size_t live = spec.init == InitRule::NormalRowsThenZeros ? spec.hf_numel() : spec.numel;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < spec.numel; ++i) {
      float v = 0.0f;
      switch (spec.init) {
        case InitRule::Normal:
          v = std * normal01(seed, s, i);
          break;
        case InitRule::NormalResidual:
          v = residual_std * normal01(seed, s, i);
          break;
        case InitRule::NormalRowsThenZeros:
          v = i < live ? std * normal01(seed, s, i) : 0.0f;
          break;
        case InitRule::Ones:
          v = 1.0f;
          break;
        case InitRule::Zeros:
          v = 0.0f;
          break;
      }
      p[i] = v;
    }
  }
}

void init_params(const ParamTable& table, FloatBuffer& params, uint64_t seed, float std, float residual_std) {
  MPT_CHECK(params.size() >= table.total(), "the parameter buffer is smaller than its table");
  if (params.memory().host_visible()) {
    init_params(table, params.data(), seed, std, residual_std);
    return;
  }
  FloatBuffer host(table.total());
  init_params(table, host.data(), seed, std, residual_std);
  params.upload(host.data(), host.size());
}

}  // namespace mptrain
