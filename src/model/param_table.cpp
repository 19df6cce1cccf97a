// Parameter table bookkeeping.
#include "model/param_table.h"

#include "core/error.h"

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

const ParamSpec& ParamTable::get(const std::string& name) const {
  for (const auto& s : specs_)
    if (s.name == name) return s;
  throw Error("no parameter named '" + name + "'");
}

}  // namespace mptrain
