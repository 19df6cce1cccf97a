// A typed view of memory that a backend owns: pointer, storage type, shape and strides (in
// elements). The op interface (backend/backend.h) takes and returns nothing else, so one op
// signature serves fp32, bf16 and fp16 tensors, packed sub-tensors (the heads inside qkv) and
// either weight layout (Conv1D [C, OC] or nn.Linear's [OC, C] read transposed) without copies.
// A view never owns; an empty view (null pointer) is an absent optional operand.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "core/dtype.h"

namespace mptrain {

struct View {
  static constexpr int kMaxRank = 4;
  void* ptr = nullptr;
  StorageType type = StorageType::F32;
  int rank = 0;
  std::array<std::int64_t, kMaxRank> shape{};
  std::array<std::int64_t, kMaxRank> stride{};

  // A contiguous row-major view of `dims` (throws Error on a rank above kMaxRank or a negative
  // dimension).
  static View of(void* ptr, StorageType type, std::initializer_list<std::int64_t> dims);
  static View of(const void* ptr, StorageType type, std::initializer_list<std::int64_t> dims) {
    return of(const_cast<void*>(ptr), type, dims);
  }

  // An index array of n ints in the backend's memory (ids, labels, offsets, rows, a mask); null
  // p: absent.
  static View ints(const int* p, std::int64_t n) { return p ? of(p, StorageType::I32, {n}) : View{}; }

  // A contiguous fp32 view (the models' parameters and gradients).
  static View f32(const float* ptr, std::initializer_list<std::int64_t> dims) {
    return of(ptr, StorageType::F32, dims);
  }

  // A present view of type t without memory or shape: a policy's question to supports()
  // (Backend::supports asks only dtypes; any entry point refuses it for its shape).
  static View dtype_only(StorageType t);

  bool empty() const { return ptr == nullptr; }
  // Dimension i; negative i counts from the end (-1: the last).
  std::int64_t dim(int i) const { return shape[static_cast<size_t>(i < 0 ? rank + i : i)]; }
  std::int64_t numel() const;
  bool contiguous() const;  // row-major and dense
  size_t bytes() const { return static_cast<size_t>(numel()) * storage_bytes(type); }
  // The last two dimensions swapped (shape and strides): a transpose that moves no data.
  View t() const;
  // The view as the element type it stores (float, Bf16, Fp16, int; an int32 view also as
  // uint32_t, the decay mask's bit words); throws Error when T does not match `type`. An empty
  // view is nullptr (an absent optional operand), whatever T.
  template <class T>
  T* as() const {
    using U = std::remove_const_t<T>;
    if (!ptr) return nullptr;
    check_type(std::is_same_v<U, float>                                     ? StorageType::F32
               : std::is_same_v<U, Bf16>                                    ? StorageType::BF16
               : std::is_same_v<U, int> || std::is_same_v<U, std::uint32_t> ? StorageType::I32
                                                                            : StorageType::F16);
    return static_cast<T*>(ptr);
  }
  // "bf16[4,768]" (strides added when not contiguous), for error messages.
  std::string describe() const;

 private:
  void check_type(StorageType t) const;
};

}  // namespace mptrain
