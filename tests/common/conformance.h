// Op conformance in the manner of ggml's test-backend-ops: one generated list of cases over every
// op of the interface (backend/backend.h's Op, and zero), each in every dtype combination the
// backend's capability check accepts, on shapes that reach every code path (scalar tails, several
// tiles, head sizes 32/64/128, T not a multiple of a tile, C not a multiple of a vector width,
// packed sequences), checked against a float64 reference computed on the host from the values the
// op actually reads (inputs rounded to their storage, GEMM operands to their arithmetic).
//
// The list is made from what supports() answers, not written per backend: a dtype combination the
// backend accepts is a case, one it refuses is not. A case that then throws or misses its tolerance
// fails; nothing is skipped once listed. The CPU half runs in CI (tests/backend/test_conformance.cpp),
// the CUDA half on a lent GPU (tests/cuda/test_backend_conformance_gpu.cpp) — the same cases.
//
// Tolerances are the norm-wise relative error ‖got − ref‖/‖ref‖ of each output, by what rounds on the
// way: 2e-5 for fp32 sums in another order, plus an ulp of the output's storage and two of each
// 16-bit (or TF32) rounding an intermediate takes. Exact results (casts, rows, zero) are compared bit
// for bit after the reference's own rounding.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "core/buffer.h"
#include "core/dtype.h"
#include "core/rng.h"

namespace mptrain::conformance {

constexpr StorageType F32 = StorageType::F32, BF16 = StorageType::BF16, F16 = StorageType::F16,
                      I32 = StorageType::I32;
inline constexpr StorageType kStorages[] = {F32, BF16, F16};
inline constexpr ComputeType kMaths[] = {ComputeType::F32, ComputeType::TF32, ComputeType::BF16,
                                         ComputeType::F16};

// --- values ----------------------------------------------------------------------------------

inline std::vector<float> randn(size_t n, uint64_t seed, float scale = 1.0f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * normal01(seed, 7, i);
  return v;
}

// v as stored in t (one round to nearest even), back in double.
inline double stored(double v, StorageType t) {
  const float f = static_cast<float>(v);
  if (t == BF16) return bf16_to_f32(f32_to_bf16(f));
  if (t == F16) return f16_to_f32(f32_to_f16(f));
  return f;
}
// v as a product of arithmetic m reads it.
inline double operand(double v, ComputeType m) {
  switch (m) {
    case ComputeType::TF32:
      return round_to_tf32(static_cast<float>(v));
    case ComputeType::BF16:
      return stored(v, BF16);
    case ComputeType::F16:
      return stored(v, F16);
    case ComputeType::F32:
      break;
  }
  return static_cast<float>(v);
}
// The relative rounding unit of a storage (or of TF32's 10-bit mantissa).
inline double ulp(StorageType t) { return t == BF16 ? 0x1p-8 : t == F16 ? 0x1p-11 : 0x1p-24; }
inline double ulp(ComputeType m) {
  return m == ComputeType::TF32 ? 0x1p-11 : m == ComputeType::BF16 ? 0x1p-8 : m == ComputeType::F16 ? 0x1p-11 : 0.0;
}
// The tolerance of an output stored in `out` after the given roundings on its way.
inline double tolerance(StorageType out, std::initializer_list<double> roundings = {}) {
  double t = 2e-5 + ulp(out);
  for (const double u : roundings) t += 2.0 * u;
  return t;
}

inline double gelu_tanh(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
inline double gelu_erf(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }
inline double gelu_tanh_grad(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  const double u = k * (x + 0.044715 * x * x * x), th = std::tanh(u);
  return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * k * (1.0 + 3.0 * 0.044715 * x * x);
}
inline double gelu_erf_grad(double x) {
  return 0.5 * std::erfc(-x / std::sqrt(2.0)) + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
}
// An activation epilogue on its input, and its derivative at what its backward reads (the GELUs'
// input, tanh's output).
inline double activation(Epilogue e, double x) {
  return e == Epilogue::BiasGelu ? gelu_tanh(x) : e == Epilogue::BiasGeluErf ? gelu_erf(x) : std::tanh(x);
}
inline double activation_grad(Epilogue e, double saved) {
  return e == Epilogue::BiasGelu ? gelu_tanh_grad(saved) : e == Epilogue::BiasGeluErf ? gelu_erf_grad(saved)
                                                                                      : 1.0 - saved * saved;
}

// --- tensors in a backend's memory ------------------------------------------------------------

// A contiguous tensor of one storage type in `be`'s memory, made from fp32 values (rounded once);
// host() is what it holds, as the op reads it.
class Tensor {
 public:
  Tensor(Backend& be, StorageType t, std::vector<std::int64_t> dims, const std::vector<float>& v = {})
      : be_(&be), type_(t), dims_(std::move(dims)) {
    n_ = 1;
    for (const std::int64_t d : dims_) n_ *= static_cast<size_t>(d);
    buf_ = FloatBuffer((n_ * storage_bytes(t) + 3) / 4 + 1, be.memory());
    host_.resize(n_);
    std::vector<unsigned char> bytes(n_ * storage_bytes(t));
    for (size_t i = 0; i < n_; ++i) {
      const float f = i < v.size() ? v[i] : 0.0f;
      host_[i] = stored(f, t);
      encode(static_cast<float>(host_[i]), &bytes[i * storage_bytes(t)]);
    }
    if (n_) be.upload(View::of(buf_.data(), t, {static_cast<std::int64_t>(n_)}), bytes.data());
  }
  View view() const {
    View v = View::of(buf_.data(), type_, {1});
    v.rank = static_cast<int>(dims_.size());
    std::int64_t stride = 1;
    for (int i = v.rank - 1; i >= 0; --i) {
      v.shape[static_cast<size_t>(i)] = dims_[static_cast<size_t>(i)];
      v.stride[static_cast<size_t>(i)] = stride;
      stride *= dims_[static_cast<size_t>(i)];
    }
    return v;
  }
  StorageType type() const { return type_; }
  const std::vector<double>& host() const { return host_; }
  std::vector<double> read() const {
    std::vector<unsigned char> bytes(n_ * storage_bytes(type_));
    if (n_) be_->download(bytes.data(), View::of(buf_.data(), type_, {static_cast<std::int64_t>(n_)}));
    std::vector<double> out(n_);
    for (size_t i = 0; i < n_; ++i) out[i] = decode(&bytes[i * storage_bytes(type_)]);
    return out;
  }

 private:
  void encode(float f, unsigned char* p) const {
    if (type_ == F32) {
      std::memcpy(p, &f, 4);
    } else {
      const std::uint16_t bits = type_ == BF16 ? f32_to_bf16(f).bits : f32_to_f16(f).bits;
      std::memcpy(p, &bits, 2);
    }
  }
  double decode(const unsigned char* p) const {
    if (type_ == F32) {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    std::uint16_t bits;
    std::memcpy(&bits, p, 2);
    return type_ == BF16 ? bf16_to_f32(Bf16{bits}) : f16_to_f32(Fp16{bits});
  }
  Backend* be_;
  StorageType type_;
  std::vector<std::int64_t> dims_;
  size_t n_ = 0;
  FloatBuffer buf_;
  std::vector<double> host_;
};

// Int indices in a backend's memory.
struct Ids {
  IndexBuffer buf;
  Ids(Backend& be, const std::vector<int>& v) : buf(v.size(), be.memory()) {
    if (!v.empty()) buf.upload(v.data(), v.size());
  }
  const int* data() const { return buf.data(); }
  View view() const { return View::ints(buf.data(), static_cast<std::int64_t>(buf.size())); }
};
inline View ints(const Ids& i) { return i.view(); }

// --- a case and its outcome ---------------------------------------------------------------------

struct Outcome {
  std::vector<std::string> misses;
  // got against ref: every finite reference value matched by a finite one, and the norm-wise
  // relative error within tol (exact when tol is 0).
  void close(const std::string& what, const std::vector<double>& got, const std::vector<double>& ref,
             double tol) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < ref.size(); ++i) {
      if (!std::isfinite(got[i]) && std::isfinite(ref[i])) {
        misses.push_back(what + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) +
                         ", expected " + std::to_string(ref[i]));
        return;
      }
      num += (got[i] - ref[i]) * (got[i] - ref[i]);
      den += ref[i] * ref[i];
    }
    const double err = den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
    if (tol == 0.0 ? num != 0.0 : !(err <= tol))
      misses.push_back(what + ": relative error " + std::to_string(err) + " > " + std::to_string(tol));
  }
};

struct Case {
  Op op = Op::Cast;
  bool zero = false;  // the `zero` entry point (no Op of its own)
  std::string name;
  std::function<void(Backend&, Outcome&)> run;
  int also = -1;  // a second op the case runs (an op's backward beside its forward), or -1
};

// Every assignment of kStorages to `positions` tensors (an op's: op_tensors(op).size()).
inline std::vector<std::vector<StorageType>> type_tuples(size_t positions) {
  std::vector<std::vector<StorageType>> out{{}};
  for (size_t p = 0; p < positions; ++p) {
    std::vector<std::vector<StorageType>> next;
    for (const auto& t : out)
      for (const StorageType s : kStorages) {
        next.push_back(t);
        next.back().push_back(s);
      }
    out = std::move(next);
  }
  return out;
}

// The tensors each op's cases enumerate dtypes over, in order: the op's own dtype choices, read off
// its Args' views() (backend.h's op_dtype_tensors); the rest of a case's views take one of these
// types, as its generator says (a linear's bias is asked by name).
inline std::vector<const char*> op_tensors(Op op) { return op_dtype_tensors(op); }

// The question of a case: the op, its enumerated tensors' types in op_tensors' order, the
// products' arithmetic, and any further named tensor the case gives the op.
inline OpTypes question(Op op, const std::vector<StorageType>& t, ComputeType m = ComputeType::F32,
                        std::initializer_list<std::pair<const char*, StorageType>> more = {}) {
  OpTypes q;
  q.op = op;
  q.math = m;
  const std::vector<const char*> names = op_tensors(op);
  for (size_t i = 0; i < t.size() && i < names.size(); ++i) q.set(names[i], t[i]);
  for (const auto& [name, type] : more) q.set(name, type);
  return q;
}

// "out=bf16 x=bf16 w=bf16 with bf16 products", a case's name.
inline std::string describe_dtypes(Op op, const std::vector<StorageType>& t, ComputeType m = ComputeType::F32) {
  return question(op, t, m).describe();
}

inline bool asks(const Backend& be, Op op, const std::vector<StorageType>& t, ComputeType m = ComputeType::F32,
                 std::initializer_list<std::pair<const char*, StorageType>> more = {}) {
  return be.supports(question(op, t, m, more));
}

}  // namespace mptrain::conformance
