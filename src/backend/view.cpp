// View: construction, sizes, the transpose and the messages that name a view.
#include "backend/view.h"

#include <utility>

#include "core/error.h"

namespace mptrain {

View View::of(void* ptr, StorageType type, std::initializer_list<std::int64_t> dims) {
  MPT_CHECK(dims.size() <= static_cast<size_t>(kMaxRank),
            "[view] rank " + std::to_string(dims.size()) + " is above " + std::to_string(kMaxRank));
  View v;
  v.ptr = ptr;
  v.type = type;
  v.rank = static_cast<int>(dims.size());
  int i = 0;
  for (std::int64_t d : dims) {
    MPT_CHECK(d >= 0, "[view] negative dimension " + std::to_string(d));
    v.shape[static_cast<size_t>(i++)] = d;
  }
  std::int64_t s = 1;
  for (int k = v.rank - 1; k >= 0; --k) {
    v.stride[static_cast<size_t>(k)] = s;
    s *= v.shape[static_cast<size_t>(k)];
  }
  return v;
}

View View::dtype_only(StorageType t) {
  static char no_memory;  // an address no op is ever given: the view only says "present, of type t"
  View v;
  v.ptr = &no_memory;
  v.type = t;
  return v;
}

std::int64_t View::numel() const {
  std::int64_t n = 1;
  for (int k = 0; k < rank; ++k) n *= shape[static_cast<size_t>(k)];
  return n;
}

bool View::contiguous() const {
  std::int64_t s = 1;
  for (int k = rank - 1; k >= 0; --k) {
    const size_t u = static_cast<size_t>(k);
    if (shape[u] != 1 && stride[u] != s) return false;
    s *= shape[u];
  }
  return true;
}

View View::t() const {
  MPT_CHECK(rank >= 2, "[view] transpose of " + describe() + " (needs two dimensions)");
  View v = *this;
  const size_t a = static_cast<size_t>(rank - 2), b = static_cast<size_t>(rank - 1);
  std::swap(v.shape[a], v.shape[b]);
  std::swap(v.stride[a], v.stride[b]);
  return v;
}

std::string View::describe() const {
  std::string s = std::string(storage_name(type)) + "[";
  for (int k = 0; k < rank; ++k) s += (k ? "," : "") + std::to_string(shape[static_cast<size_t>(k)]);
  s += "]";
  if (!contiguous()) {
    s += " strides (";
    for (int k = 0; k < rank; ++k) s += (k ? "," : "") + std::to_string(stride[static_cast<size_t>(k)]);
    s += ")";
  }
  return s;
}

void View::check_type(StorageType t) const {
  MPT_CHECK(t == type, std::string("[view] ") + describe() + " read as " + storage_name(t));
}

}  // namespace mptrain
