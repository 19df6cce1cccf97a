// Packed (unpadded) BERT batches on the CUDA backend (backend/backend.h's EmbeddingArgs), reached
// through the public Backend entry points as the model reaches them: the attention (forward and
// backward) and the embeddings (forward and backward, with token types and the [PAD] row) over four
// sequences of T = 130 (two 64-row flash tiles and a ragged third): 97 rows, one row, the whole of
// T and exactly one tile. Their 292 rows get the memory of ⌈292 / 130⌉ = 3 sequences of T, fewer
// than the batch has. Two references:
//   - the CPU backend's packed result (the conformance test's tolerances: fp32 1e-5, 16-bit 2e-2);
//   - the CUDA backend's padded layout (each sequence padded to T under the key mask, the padding's
//     inputs random and its upstream gradients 0), read back at the real rows. The flash kernels
//     and the embeddings do the same per-sequence arithmetic in both layouts (the padding only
//     adds exact zeros), so they must agree to 1e-6; the naive path's packed kernels sum in
//     another order than its padded GEMMs, so they get the CPU tolerances.
// Every storage type, flash attention (bf16, fp16; head sizes 64 and 128) and the packed naive
// kernels (fp32; 16-bit with flash turned off, and at head size 16, which flash does not take).
// Outputs start as NaN, so a row no kernel wrote fails. Skipped without a GPU, except the size
// check at the end, which is arithmetic only.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/attention.h"
#include "backend/cuda/flash_attention.h"
#include "backend/device.h"
#include "cuda/gpu_test_util.h"

namespace mptrain {
namespace {

using gputest::rel_err;
constexpr StorageType F32 = StorageType::F32, BF16 = StorageType::BF16, F16 = StorageType::F16;
constexpr StorageType kTypes[] = {F32, BF16, F16};
constexpr double kSameArithmetic = 1e-6;  // packed against padded where the arithmetic is the same

double cpu_tolerance(StorageType t) { return t == F32 ? 1e-5 : 2e-2; }
ComputeType math_of(StorageType t) {
  return t == BF16 ? ComputeType::BF16 : t == F16 ? ComputeType::F16 : ComputeType::F32;
}

// The batch: sequence b is packed rows [cu[b], cu[b+1]), padded rows [b·T, b·T + L_b).
struct Packing {
  int T = 130;
  std::vector<int> lengths = {97, 1, 130, 64};
  int B() const { return static_cast<int>(lengths.size()); }
  std::vector<int> cu() const {
    std::vector<int> c{0};
    for (const int L : lengths) c.push_back(c.back() + L);
    return c;
  }
  int rows() const { return cu().back(); }
  int memory_batch() const { return (rows() + T - 1) / T; }  // backend.h's AttentionArgs
  std::vector<int> key_mask() const {
    std::vector<int> m(static_cast<size_t>(B()) * T, 0);
    for (int b = 0; b < B(); ++b)
      for (int t = 0; t < lengths[b]; ++t) m[static_cast<size_t>(b) * T + t] = 1;
    return m;
  }
  // [B·T, cols]: the packed rows at their padded places, `fill` everywhere else.
  std::vector<float> pad(const std::vector<float>& packed, int cols, std::vector<float> fill) const {
    const std::vector<int> c = cu();
    for (int b = 0; b < B(); ++b)
      std::memcpy(&fill[static_cast<size_t>(b) * T * cols], &packed[static_cast<size_t>(c[b]) * cols],
                  static_cast<size_t>(lengths[b]) * cols * sizeof(float));
    return fill;
  }
  // The real rows of a padded [B·T, cols], packed.
  std::vector<float> unpad(const std::vector<float>& padded, int cols) const {
    std::vector<float> packed(static_cast<size_t>(rows()) * cols);
    const std::vector<int> c = cu();
    for (int b = 0; b < B(); ++b)
      std::memcpy(&packed[static_cast<size_t>(c[b]) * cols], &padded[static_cast<size_t>(b) * T * cols],
                  static_cast<size_t>(lengths[b]) * cols * sizeof(float));
    return packed;
  }
};

// One [rows, cols] tensor in a backend's memory, stored as `type`, written and read as floats.
class Tensor {
 public:
  Tensor(Backend& be, StorageType type, std::int64_t rows, std::int64_t cols,
         const std::vector<float>& values)
      : be_(&be), type_(type), rows_(rows), cols_(cols) {
    const size_t n = static_cast<size_t>(rows * cols), eb = storage_bytes(type);
    buf_.resize((n * eb + 3) / 4 + 1, be.memory());
    std::vector<unsigned char> bytes(n * eb);
    for (size_t i = 0; i < n; ++i) store(values[i], &bytes[i * eb]);
    be.upload(view(), bytes.data());
  }
  View view() const { return View::of(buf_.data(), type_, {rows_, cols_}); }
  std::vector<float> read() const {
    const size_t n = static_cast<size_t>(rows_ * cols_), eb = storage_bytes(type_);
    std::vector<unsigned char> bytes(n * eb);
    be_->download(bytes.data(), view());
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = load(&bytes[i * eb]);
    return v;
  }

 private:
  void store(float x, unsigned char* p) const {
    if (type_ == F32) {
      std::memcpy(p, &x, 4);
    } else {
      const std::uint16_t bits = type_ == BF16 ? f32_to_bf16(x).bits : f32_to_f16(x).bits;
      std::memcpy(p, &bits, 2);
    }
  }
  float load(const unsigned char* p) const {
    if (type_ == F32) {
      float x;
      std::memcpy(&x, p, 4);
      return x;
    }
    std::uint16_t bits;
    std::memcpy(&bits, p, 2);
    return type_ == BF16 ? bf16_to_f32(Bf16{bits}) : f16_to_f32(Fp16{bits});
  }
  Backend* be_;
  StorageType type_;
  std::int64_t rows_, cols_;
  FloatBuffer buf_;
};

// Index lists in a backend's memory (an empty view for an empty list).
struct Ids {
  IndexBuffer buf;
  Ids(Backend& be, const std::vector<int>& v) : buf(v.size(), be.memory()) { buf.upload(v.data(), v.size()); }
  View view() const { return View::ints(buf.data(), static_cast<std::int64_t>(buf.size())); }
};

std::vector<float> nans(size_t n) { return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()); }

// Values as stored in t, so that every layout and backend starts from the same numbers.
std::vector<float> rounded(StorageType t, std::vector<float> v) {
  for (float& x : v) x = t == F32 ? x : t == BF16 ? bf16_to_f32(f32_to_bf16(x)) : f16_to_f32(f32_to_f16(x));
  return v;
}

struct AttentionResult {
  std::vector<float> out, dqkv;
};

// Forward then backward on `be` with the memory attention_bytes(memory_batch, T) gives (exactly
// that: no slack). Packed under cu (that backend's memory), padded under key_mask, out and dqkv
// starting as NaN.
AttentionResult run_attention(Backend& be, StorageType t, int B, int T, int C, int NH, int memory_batch,
                              const std::vector<float>& qkv, const std::vector<float>& dout, const View& cu,
                              const View& key_mask) {
  const std::int64_t rows = static_cast<std::int64_t>(dout.size()) / C;
  const AttentionDtypes types{t, t, t, math_of(t), math_of(t)};
  const AttentionBytes bytes = be.attention_bytes(memory_batch, T, C, NH, types);
  const size_t saved_words = (bytes.saved + 3) / 4, scratch_words = (bytes.scratch + 3) / 4;
  const Tensor saved(be, F32, 1, static_cast<std::int64_t>(saved_words), nans(saved_words));
  const Tensor scratch(be, F32, 1, static_cast<std::int64_t>(scratch_words), nans(scratch_words));
  const Tensor x(be, t, rows, 3 * C, qkv), dy(be, t, rows, C, dout);
  const Tensor y(be, t, rows, C, nans(static_cast<size_t>(rows) * C));
  const Tensor dx(be, t, rows, 3 * C, nans(static_cast<size_t>(rows) * 3 * C));
  be.attention({.out = y.view(),
                .qkv = x.view(),
                .saved = saved.view(),
                .scratch = scratch.view(),
                .B = B,
                .T = T,
                .NH = NH,
                .types = types,
                .causal = false,
                .key_mask = key_mask,
                .cu_seqlens = cu});
  be.attention_backward({.dqkv = dx.view(),
                         .dout = dy.view(),
                         .out = y.view(),
                         .qkv = x.view(),
                         .saved = saved.view(),
                         .scratch = scratch.view(),
                         .B = B,
                         .T = T,
                         .NH = NH,
                         .types = types,
                         .causal = false,
                         .cu_seqlens = cu});
  return {y.read(), dx.read()};
}

class PackedSequencesGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    flash_ = make_cuda_backend(0);
    naive_ = make_cuda_backend(0, CudaOptions{.flash = false});
  }
  cpu::CpuBackend cpu_{gputest::cpu_ctx()};
  std::unique_ptr<Backend> flash_, naive_;
};

// Whether `be` has an attention, or embeddings, all in t (asked with placeholder arguments).
bool has_attention(const Backend& be, StorageType t) {
  const View v = View::dtype_only(t);
  return be.supports(AttentionArgs{.out = v, .qkv = v, .types = {t, t, t, math_of(t), math_of(t)}});
}
bool has_embedding(const Backend& be, StorageType t) {
  const View v = View::dtype_only(t);
  return be.supports(EmbeddingArgs{.out = v, .word = v});
}

// Head sizes 64 and 128 (flash's) and 16 (the naive kernels even in 16 bits).
TEST_F(PackedSequencesGpu, AttentionMatchesThePaddedLayoutAndTheCpu) {
  const Packing p;
  const int B = p.B(), T = p.T, rows = p.rows();
  int tested = 0;
  for (const bool use_flash : {true, false}) {
    Backend& gpu = use_flash ? *flash_ : *naive_;
    const Ids cu(gpu, p.cu()), mask(gpu, p.key_mask()), cpu_cu(cpu_, p.cu());
    for (const StorageType t : kTypes)
      for (const auto& [NH, C] : {std::pair{2, 128}, std::pair{1, 128}, std::pair{4, 64}}) {
        if (!has_attention(gpu, t)) continue;
        const bool flash_runs = use_flash && cuda::flash_attention_supported(C, NH, t);
        const std::string what = std::string(storage_name(t)) + " NH=" + std::to_string(NH) +
                                 " HS=" + std::to_string(C / NH) + (flash_runs ? " flash" : " naive");
        SCOPED_TRACE(what);
        const std::vector<float> qkv =
            rounded(t, gputest::randn(static_cast<size_t>(rows) * 3 * C, 70, 0.8f));
        const std::vector<float> dout = rounded(t, gputest::randn(static_cast<size_t>(rows) * C, 71));
        const AttentionResult packed =
            run_attention(gpu, t, B, T, C, NH, p.memory_batch(), qkv, dout, cu.view(), View{});

        // Padded: random q, k, v on the padding (masked keys, queries no one reads), dY 0 there.
        const size_t padded_rows = static_cast<size_t>(B) * T;
        const std::vector<float> qkv_pad =
            p.pad(qkv, 3 * C, rounded(t, gputest::randn(padded_rows * 3 * C, 72, 0.8f)));
        const std::vector<float> dout_pad = p.pad(dout, C, std::vector<float>(padded_rows * C, 0.0f));
        const AttentionResult padded =
            run_attention(gpu, t, B, T, C, NH, B, qkv_pad, dout_pad, View{}, mask.view());
        const double same = flash_runs ? kSameArithmetic : cpu_tolerance(t);
        EXPECT_LE(rel_err(packed.out, p.unpad(padded.out, C)), same) << "out, packed vs padded";
        EXPECT_LE(rel_err(packed.dqkv, p.unpad(padded.dqkv, 3 * C)), same) << "dqkv, packed vs padded";

        if (has_attention(cpu_, t)) {
          const AttentionResult ref =
              run_attention(cpu_, t, B, T, C, NH, p.memory_batch(), qkv, dout, cpu_cu.view(), View{});
          EXPECT_LT(rel_err(packed.out, ref.out), cpu_tolerance(t)) << "out vs the CPU";
          EXPECT_LT(rel_err(packed.dqkv, ref.dqkv), cpu_tolerance(t)) << "dqkv vs the CPU";
        }
        ++tested;
      }
  }
  EXPECT_EQ(tested, 18);  // every storage type and head size, flash on and off
}

struct EmbeddingResult {
  std::vector<float> out, dword, dpos, dtype;
};

struct EmbeddingInputs {
  int V = 50, C = 72;
  std::vector<int> tokens, types;  // [rows]
  std::vector<float> word, pos, type, dword, dpos, dtype, dout;
};

// Forward, then backward accumulating into the given starting gradients; out starts as NaN.
EmbeddingResult run_embedding(Backend& be, StorageType t, int B, int T, const EmbeddingInputs& in,
                              const View& cu, int pad_token) {
  const int C = in.C, V = in.V;
  const std::int64_t rows = static_cast<std::int64_t>(in.tokens.size());
  const Ids tokens(be, in.tokens), types(be, in.types);
  const Tensor word(be, t, V, C, in.word), pos(be, t, T, C, in.pos), type(be, t, 2, C, in.type);
  const Tensor dword(be, t, V, C, in.dword), dpos(be, t, T, C, in.dpos), dtype(be, t, 2, C, in.dtype);
  const Tensor out(be, t, rows, C, nans(static_cast<size_t>(rows) * C)), dout(be, t, rows, C, in.dout);
  be.embedding({.out = out.view(),
                .tokens = tokens.view(),
                .B = B,
                .T = T,
                .cu_seqlens = cu,
                .word = word.view(),
                .pos = pos.view(),
                .types = types.view(),
                .type_table = type.view()});
  be.embedding_backward({.dword = dword.view(),
                         .dpos = dpos.view(),
                         .dtype = dtype.view(),
                         .dout = dout.view(),
                         .tokens = tokens.view(),
                         .types = types.view(),
                         .B = B,
                         .T = T,
                         .cu_seqlens = cu,
                         .pad_token = pad_token});
  return {out.read(), dword.read(), dpos.read(), dtype.read()};
}

// C = 72 takes the vectorised forward, C = 33 the scalar one. Repeated tokens across sequences,
// [PAD] (0) inside real rows, both token types.
TEST_F(PackedSequencesGpu, EmbeddingsMatchThePaddedLayoutAndTheCpu) {
  const Packing p;
  const int B = p.B(), T = p.T, rows = p.rows(), pad = 0;
  const std::vector<int> cu_host = p.cu();
  const Ids cu(*flash_, cu_host), cpu_cu(cpu_, cu_host);
  int tested = 0;
  for (const StorageType t : kTypes)
    for (const int C : {72, 33}) {
      if (!has_embedding(*flash_, t)) continue;
      SCOPED_TRACE(std::string(storage_name(t)) + " C=" + std::to_string(C));
      EmbeddingInputs in;
      in.C = C;
      for (int r = 0; r < rows; ++r) {
        in.tokens.push_back(r % 11 == 5 ? pad : 1 + (7 * r + 3) % (in.V - 1));
        in.types.push_back(r % 5 < 2 ? 1 : 0);
      }
      const auto rand = [&](size_t n, std::uint64_t seed) { return rounded(t, gputest::randn(n, seed)); };
      const size_t vc = static_cast<size_t>(in.V) * C, tc = static_cast<size_t>(T) * C;
      in.word = rand(vc, 80);
      in.pos = rand(tc, 81);
      in.type = rand(2 * static_cast<size_t>(C), 82);
      in.dword = rand(vc, 83);  // the += starting values
      in.dpos = rand(tc, 84);
      in.dtype = rand(2 * static_cast<size_t>(C), 85);
      in.dout = rand(static_cast<size_t>(rows) * C, 86);
      const EmbeddingResult packed = run_embedding(*flash_, t, B, T, in, cu.view(), pad);

      // Padded: [PAD] tokens of type 0 on the padding, whose dout is 0.
      EmbeddingInputs padded_in = in;
      padded_in.tokens.assign(static_cast<size_t>(B) * T, pad);
      padded_in.types.assign(static_cast<size_t>(B) * T, 0);
      for (int b = 0; b < B; ++b)
        for (int i = 0; i < p.lengths[b]; ++i) {
          padded_in.tokens[static_cast<size_t>(b) * T + i] = in.tokens[static_cast<size_t>(cu_host[b] + i)];
          padded_in.types[static_cast<size_t>(b) * T + i] = in.types[static_cast<size_t>(cu_host[b] + i)];
        }
      padded_in.dout = p.pad(in.dout, C, std::vector<float>(static_cast<size_t>(B) * T * C, 0.0f));
      const EmbeddingResult padded = run_embedding(*flash_, t, B, T, padded_in, View{}, pad);
      EXPECT_LE(rel_err(packed.out, p.unpad(padded.out, C)), kSameArithmetic) << "out, packed vs padded";
      EXPECT_LE(rel_err(packed.dword, padded.dword), kSameArithmetic) << "dword, packed vs padded";
      EXPECT_LE(rel_err(packed.dpos, padded.dpos), kSameArithmetic) << "dpos, packed vs padded";
      EXPECT_LE(rel_err(packed.dtype, padded.dtype), kSameArithmetic) << "dtype, packed vs padded";
      for (int c = 0; c < C; ++c)
        EXPECT_EQ(packed.dword[static_cast<size_t>(pad) * C + c], in.dword[static_cast<size_t>(pad) * C + c])
            << "the [PAD] row took gradient at channel " << c;

      if (has_embedding(cpu_, t)) {
        const EmbeddingResult ref = run_embedding(cpu_, t, B, T, in, cpu_cu.view(), pad);
        EXPECT_LT(rel_err(packed.out, ref.out), cpu_tolerance(t)) << "out vs the CPU";
        EXPECT_LT(rel_err(packed.dword, ref.dword), cpu_tolerance(t)) << "dword vs the CPU";
        EXPECT_LT(rel_err(packed.dpos, ref.dpos), cpu_tolerance(t)) << "dpos vs the CPU";
        EXPECT_LT(rel_err(packed.dtype, ref.dtype), cpu_tolerance(t)) << "dtype vs the CPU";
      }
      ++tested;
    }
  EXPECT_EQ(tested, 6);  // every storage type, both widths
}

// Arithmetic only (no GPU): what the packed kernels keep and use fits the memory backend.h's
// AttentionArgs gives a packed batch of `rows`, attention_bytes for ⌈rows / T⌉ sequences of T.
TEST(PackedSequenceSizes, FitTheMemoryOfAPackedBatch) {
  for (const int T : {1, 64, 130, 512})
    for (const int rows : {1, 63, 64, 129, 130, 131, 292, 4096})
      for (const StorageType t : kTypes) {
        SCOPED_TRACE("T=" + std::to_string(T) + " rows=" + std::to_string(rows) + " " + storage_name(t));
        const int B = (rows + T - 1) / T, NH = 4, C = 256;
        EXPECT_LE(cuda::attention_packed_saved_bytes(rows, T, NH, t),
                  cuda::attention_saved_bytes(B, T, C, NH, t));
        EXPECT_LE(cuda::attention_packed_scratch_bytes(rows, T, NH, t),
                  cuda::attention_scratch_bytes(B, T, C, NH, t));
        EXPECT_LE(static_cast<size_t>(rows) * NH * sizeof(float), cuda::flash_attention_saved_bytes(B, T, NH))
            << "lse per row";
        EXPECT_LE(static_cast<size_t>(rows) * NH * sizeof(float),
                  cuda::flash_attention_scratch_bytes(B, T, NH))
            << "D per row";
      }
}

}  // namespace
}  // namespace mptrain
