// The gradient-ready hook's ranges, shared by the device models that announce their gradients
// range by range as the backward makes them final (Gpt2Device::set_grad_ready,
// BertDevice::set_grad_ready), so that a data-parallel reduction overlaps the rest of the
// backward. The ranges are derived from the parameter table's names and checked here, not
// assumed: a table reordered so that a block's tensors are no longer contiguous, or so that the
// ranges no longer tile it, fails at construction with one Error instead of reducing a
// gradient the backward still writes.
#pragma once
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "core/param_table.h"

namespace mptrain::cuda {

using GradRange = std::pair<size_t, size_t>;  // [begin, end) of the flat parameter table

// The one contiguous range of the tensors whose names start with any of `prefixes`. Throws
// Error, prefixed with `who` (e.g. "[bert-cuda]"), when no tensor matches or the matching
// tensors are not one contiguous block of the table.
GradRange prefixed_range(const ParamTable& table, const std::vector<std::string>& prefixes,
                         const std::string& who);

// Throws Error(message) unless `ranges`, in their order, tile [0, n) from the top down: the
// first ends at n, each ends where the one before it begins, the last begins at 0, none is
// empty. That is the hook's contract: disjoint, every parameter exactly once.
void check_top_down_tiling(const std::vector<GradRange>& ranges, size_t n, const std::string& message);

}  // namespace mptrain::cuda
