// The activations (backend/ops/activations.h): chunks widened to fp32 on the stack (lowp.h's
// map_chunks_typed), fp32 math, one rounding on output (none for fp32).
//
// GELU, tanh approximation. With u = sqrt(2/pi)·(x + 0.044715·x^3) and s = sigmoid(2u):
//   0.5·(1 + tanh(u)) = s,   so gelu(x) = x·s = x / (1 + exp(-2u)),
//   gelu'(x) = s + 2·x·s·(1 - s)·u'(x),   u'(x) = sqrt(2/pi)·(1 + 3·0.044715·x^2).
// The sigmoid form needs one exp and no tanh, and vexp keeps the loop vectorised.
// bias_gelu_forward_typed is the MLP's fc epilogue in one pass (bias, round, GELU, round), the
// fused twin of bias_forward_typed followed by gelu_forward_typed (or gelu_erf_forward_typed).
//
// Exact GELU (BERT's activation in Hugging Face): with Phi the standard normal CDF,
//   gelu(x)  = x·Phi(x) = 0.5·x·(1 + erf(x/sqrt(2))) = 0.5·x·erfc(-x/sqrt(2))
//   gelu'(x) = Phi(x) + x·phi(x),   phi(x) = exp(-x^2/2)/sqrt(2·pi).
// Phi is taken as 0.5·erfc(-x/sqrt(2)), not 0.5·(1 + erf(·)): for negative x, 1 + erf cancels to
// a few ulps of 1 (1e-7 absolute) where Phi itself is tiny, and libmvec's AVX-512 erff saturates
// to -1 from x ≈ -3.6 (3.9 ulp; its AVX2 form is within 1) — the tail then loses every digit.
// erfcf (verfc: libmvec's vector erfcf, within 1.5 ulp on AVX2 and AVX-512, measured over
// [-7, 7]) has no cancellation on either side; verfc and vexp keep both loops vectorised.
//
// tanh (BERT's pooler, [B, C] values per step): libm's tanhf, where matching PyTorch's rounding
// matters more than speed.
#include "backend/ops/activations.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "backend/cpu/lowp.h"
#include "backend/cpu/vec_math.h"

namespace mptrain::cpu {

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
// exp(-2u) is clamped here so that 1 + e stays a normal float (x is then < -9 and gelu(x) is
// below 1e-34 in magnitude either way).
constexpr float kMaxExpArg = 80.0f;

inline float sigmoid_2u(float x) {
  float u = kSqrt2OverPi * (x + kCubic * x * x * x);
  float a = -2.0f * u;
  a = a > kMaxExpArg ? kMaxExpArg : a;
  return 1.0f / (1.0f + vexp(a));
}

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

inline float gelu_erf(float x) { return 0.5f * x * verfc(-x * kInvSqrt2); }

// out[N, OC] (dtype to) ← gelu(x) in `form`, rows in parallel, each in chunks of kChunk that
// load(x, at, c0, len) fills in fp32 (at: the chunk's first element, c0: its first column). The
// fused epilogue and the standalone GELU share this one loop, so both apply the same vector and
// scalar code to the same positions of a chunk: the refill has the epilogue's bits.
template <class Load>
void gelu_rows(void* out, StorageType to, int N, int OC, GeluForm form, const Load& load) {
  const size_t eo = storage_bytes(to);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const size_t row = static_cast<size_t>(n) * OC;
    float x[kChunk];
    for (int c0 = 0; c0 < OC; c0 += static_cast<int>(kChunk)) {
      const size_t len = static_cast<size_t>(std::min(static_cast<int>(kChunk), OC - c0));
      load(x, row + c0, c0, len);
      if (form == GeluForm::Tanh) {
#pragma omp simd
        for (size_t i = 0; i < len; ++i) x[i] = x[i] * sigmoid_2u(x[i]);
      } else {
#pragma omp simd
        for (size_t i = 0; i < len; ++i) x[i] = gelu_erf(x[i]);
      }
      dispatch_storage(to, [&](auto t) {
        narrow_span(reinterpret_cast<decltype(t)*>(static_cast<char*>(out) + (row + c0) * eo), x, len);
      });
    }
  }
}
inline float gelu_erf_grad(float x, float dy) {
  const float cdf = 0.5f * verfc(-x * kInvSqrt2);
  const float pdf = kInvSqrt2Pi * vexp(-0.5f * x * x);
  return (cdf + x * pdf) * dy;
}
}  // namespace

void gelu_forward_typed(void* out, StorageType to, const void* inp, StorageType ti, size_t N) {
  map_chunks_typed(out, to, inp, ti, N, [](float* x, size_t, size_t len) {
#pragma omp simd
    for (size_t i = 0; i < len; ++i) x[i] = x[i] * sigmoid_2u(x[i]);
  });
}

void bias_gelu_forward_typed(void* pre, StorageType tp, void* out, StorageType to, const float* acc,
                             const float* bias, int N, int OC, GeluForm form) {
  const size_t ep = storage_bytes(tp);
  gelu_rows(out, to, N, OC, form, [&](float* x, size_t at, int c0, size_t len) {
    const float* a = acc + at;
    if (bias)
      for (size_t c = 0; c < len; ++c) x[c] = a[c] + bias[c0 + c];
    else
      for (size_t c = 0; c < len; ++c) x[c] = a[c];
    // Round to the pre-activation's dtype, and GELU reads the rounded value (as the unfused
    // pair does, which reads it back from memory).
    dispatch_storage(tp, [&](auto t) {
      using T = decltype(t);
      T* p = reinterpret_cast<T*>(static_cast<char*>(pre) + at * ep);
      narrow_span(p, x, len);
      widen_span(x, p, len);
    });
  });
}

void gelu_rows_typed(void* out, StorageType to, const void* x, StorageType tx, int N, int OC, GeluForm form) {
  const size_t ex = storage_bytes(tx);
  gelu_rows(out, to, N, OC, form, [&](float* v, size_t at, int, size_t len) {
    dispatch_storage(tx, [&](auto t) {
      widen_span(v, reinterpret_cast<const decltype(t)*>(static_cast<const char*>(x) + at * ex), len);
    });
  });
}

void gelu_backward_typed(void* dinp, StorageType td, const void* inp, StorageType ti, const float* dout,
                         size_t N) {
  map_chunks_typed(dinp, td, inp, ti, N, [dout](float* x, size_t i0, size_t len) {
    const float* dy = dout + i0;
#pragma omp simd
    for (size_t i = 0; i < len; ++i) {
      const float v = x[i];
      const float s = sigmoid_2u(v);
      const float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
      x[i] = (s + 2.0f * v * s * (1.0f - s) * du) * dy[i];
    }
  });
}

void gelu_erf_forward_typed(void* out, StorageType to, const void* inp, StorageType ti, size_t N) {
  map_chunks_typed(out, to, inp, ti, N, [](float* x, size_t, size_t len) {
#pragma omp simd
    for (size_t i = 0; i < len; ++i) x[i] = gelu_erf(x[i]);
  });
}

void gelu_erf_backward_typed(void* dinp, StorageType td, const void* inp, StorageType ti, const float* dout,
                             size_t N) {
  map_chunks_typed(dinp, td, inp, ti, N, [dout](float* x, size_t i0, size_t len) {
#pragma omp simd
    for (size_t i = 0; i < len; ++i) x[i] = gelu_erf_grad(x[i], dout[i0 + i]);
  });
}

void tanh_forward_typed(void* out, StorageType to, const void* inp, StorageType ti, size_t N) {
  map_chunks_typed(out, to, inp, ti, N, [](float* x, size_t, size_t len) {
    for (size_t i = 0; i < len; ++i) x[i] = std::tanh(x[i]);
  });
}

void tanh_backward_typed(void* dinp, StorageType td, const void* out, StorageType to, const float* dout,
                         size_t N) {
  map_chunks_typed(dinp, td, out, to, N, [dout](float* y, size_t i0, size_t len) {
    for (size_t i = 0; i < len; ++i) y[i] = (1.0f - y[i] * y[i]) * dout[i0 + i];
  });
}

namespace {
// sigmoid(g) through vexp (vectorised); vexp's clamp at 88 gives 0 for g < −88, as it should.
inline float sigmoid(float g) { return 1.0f / (1.0f + vexp(-g)); }
}  // namespace

void swiglu_forward(float* out, const float* gate_up, int N, int I) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* g = gate_up + static_cast<size_t>(n) * 2 * I;
    const float* u = g + I;
    float* y = out + static_cast<size_t>(n) * I;
#pragma omp simd
    for (int c = 0; c < I; ++c) y[c] = g[c] * sigmoid(g[c]) * u[c];
  }
}

void swiglu_backward(float* dgate_up, const float* dout, const float* gate_up, int N, int I) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* g = gate_up + static_cast<size_t>(n) * 2 * I;
    const float* u = g + I;
    const float* dy = dout + static_cast<size_t>(n) * I;
    float* dg = dgate_up + static_cast<size_t>(n) * 2 * I;
    float* du = dg + I;
#pragma omp simd
    for (int c = 0; c < I; ++c) {
      const float s = sigmoid(g[c]);
      dg[c] = dy[c] * u[c] * s * (1.0f + g[c] * (1.0f - s));
      du[c] = dy[c] * g[c] * s;
    }
  }
}

void relu2_forward(float* out, const float* x, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const float r = x[i] > 0.0f ? x[i] : 0.0f;
    out[i] = r * r;
  }
}

void relu2_backward(float* dx, const float* dout, const float* x, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) dx[i] = dout[i] * 2.0f * (x[i] > 0.0f ? x[i] : 0.0f);
}

}  // namespace mptrain::cpu
