// The one dtype-dispatch helper of the CUDA backend: maps a runtime StorageType (data: the
// precision policy's choice) to the C++ storage type that templated launchers take.
//   dispatch_storage(t, [&](auto tag) { using T = typename decltype(tag)::type; op<T>(...); });
// Launchers are explicitly instantiated for exactly these three types (float, Bf16, Fp16).
#pragma once
#include <string>
#include <type_traits>

#include "core/dtype.h"
#include "core/error.h"

namespace mptrain::cuda {

template <class T>
struct TypeTag {
  using type = T;
};

template <class T>
constexpr StorageType storage_of() {
  if constexpr (std::is_same_v<T, float>)
    return StorageType::F32;
  else if constexpr (std::is_same_v<T, Bf16>)
    return StorageType::BF16;
  else {
    static_assert(std::is_same_v<T, Fp16>, "storage types are float, Bf16 and Fp16");
    return StorageType::F16;
  }
}

template <class F>
decltype(auto) dispatch_storage(StorageType t, F&& f) {
  switch (t) {
    case StorageType::F32:
      return f(TypeTag<float>{});
    case StorageType::BF16:
      return f(TypeTag<Bf16>{});
    case StorageType::F16:
      return f(TypeTag<Fp16>{});
    case StorageType::I32:
      break;
  }
  throw Error("[cuda] unknown storage type " + std::to_string(static_cast<int>(t)));
}

}  // namespace mptrain::cuda
