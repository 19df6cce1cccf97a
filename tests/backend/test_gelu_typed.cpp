// The typed GELU variants (both forms: tanh for GPT-2, erf for BERT), forward and backward, against
// their fp32 functions on the same (widened) inputs: every element written, each within half a
// unit of the output dtype's last place (plus a few fp32 ulps), and the fp32 gradient read at the
// right offset in every chunk (sizes straddle lowp.h's kChunk = 1024, so several chunks run on
// several threads).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/cpu_fp32.h"
#include "core/dtype.h"
#include "op_test_util.h"

namespace mptrain::cpu {
namespace {

struct GeluVariant {
  const char* name;
  void (*fwd)(float*, const float*, size_t);
  void (*bwd)(float*, const float*, const float*, size_t);
  void (*fwd_typed)(void*, StorageType, const void*, StorageType, size_t);
  void (*bwd_typed)(void*, StorageType, const void*, StorageType, const float*, size_t);
};
const GeluVariant kForms[] = {
    {"gelu", gelu_forward, gelu_backward, gelu_forward_typed, gelu_backward_typed},
    {"gelu_erf", gelu_erf_forward, gelu_erf_backward, gelu_erf_forward_typed, gelu_erf_backward_typed},
};

// A buffer of n elements of dtype t holding x rounded (and the rounded values, for the reference).
struct Typed {
  std::vector<uint16_t> w16;
  std::vector<float> w32;
  StorageType t;
  Typed(StorageType type, size_t n, float fill) : w16(n, 0xffff), w32(n, fill), t(type) {}
  void* data() { return t == StorageType::F32 ? static_cast<void*>(w32.data()) : w16.data(); }
  std::vector<float> values() const {
    std::vector<float> v(w32.size());
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = t == StorageType::F32    ? w32[i]
             : t == StorageType::BF16 ? bf16_to_f32(Bf16{w16[i]})
                                      : f16_to_f32(Fp16{w16[i]});
    return v;
  }
};
Typed rounded(const std::vector<float>& x, StorageType t) {
  Typed r(t, x.size(), 0.0f);
  for (size_t i = 0; i < x.size(); ++i) {
    if (t == StorageType::F32)
      r.w32[i] = x[i];
    else if (t == StorageType::BF16)
      r.w16[i] = f32_to_bf16(x[i]).bits;
    else
      r.w16[i] = f32_to_f16(x[i]).bits;
  }
  return r;
}

// Half an ulp of the output dtype relative, plus slack for fp32 evaluation differences.
double tolerance(StorageType t) {
  return t == StorageType::F32 ? 1e-6 : t == StorageType::BF16 ? 4e-3 : 5e-4;
}

TEST(GeluTyped, EveryFormDtypeAndChunkMatchesTheFp32Function) {
  test::ScopedThreads threads(2);
  const StorageType types[] = {StorageType::F32, StorageType::BF16, StorageType::F16};
  for (const GeluVariant& form : kForms) {
    for (const size_t n : {size_t{1}, size_t{1023}, size_t{1024}, size_t{1025}, size_t{3001}}) {
      const std::vector<float> x0 = test::randn(n, 7 + n, 3.0f), dout = test::randn(n, 8 + n, 1.0f);
      for (const StorageType ti : types) {
        Typed in = rounded(x0, ti);
        const std::vector<float> x = in.values();
        std::vector<float> ref(n), dref(n);
        form.fwd(ref.data(), x.data(), n);
        form.bwd(dref.data(), x.data(), dout.data(), n);
        for (const StorageType to : types) {
          const std::string what = std::string(form.name) + " " + storage_name(ti) + "->" + storage_name(to) +
                                   " n=" + std::to_string(n);
          Typed out(to, n, test::kPoison), din(to, n, test::kPoison);
          form.fwd_typed(out.data(), to, in.data(), ti, n);
          form.bwd_typed(din.data(), to, in.data(), ti, dout.data(), n);
          const std::vector<float> got = out.values(), dgot = din.values();
          const double tol = tolerance(to);
          for (size_t i = 0; i < n; ++i) {
            ASSERT_NEAR(got[i], ref[i], tol * std::fabs(ref[i]) + 1e-6) << what << " forward at " << i;
            ASSERT_NEAR(dgot[i], dref[i], tol * std::fabs(dref[i]) + 1e-6) << what << " backward at " << i;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace mptrain::cpu
