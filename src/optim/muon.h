// Muon (Keller Jordan 2024; torch.optim.Muon; Moonlight, Liu et al. 2025) for the hidden matrices
// of a transformer, AdamW for every other parameter:
//
//   every hidden matrix W (attention and MLP weights; ParamSpec::matrix):
//     B ← μ·B + G                          (momentum, μ = 0.95)
//     U = G + μ·B  (Nesterov)  or  U = B
//     O = NS5(U)                            (orthogonalised: U's singular values pushed to ~1)
//     W ← W·(1 − lr·wd) − lr·s·O            (decoupled decay, AdamW's wd; s the lr adjustment below)
//   NS5: X = U / (‖U‖_F + 1e-7), transposed when it has more rows than columns; 5 times
//     A = X·Xᵀ;  B = b·A + c·A·A;  X = a·X + B·X      (a, b, c) = (3.4445, −4.7750, 2.0315)
//   in the policy's newton_schulz arithmetic (bf16 products with fp32 sums under mixed precision).
//   every other tensor (embeddings, the heads, biases, LayerNorm): AdamW at lr·adamw_lr_ratio.
//
// torch.optim.Muon keeps B as an EMA (lerp with 1 − μ), which scales U by the constant 1 − μ;
// NS5 normalises U first, so the two give the same update.
//
// The lr adjustment s per matrix of fan_out × fan_in (nn.Linear's [out, in]; GPT-2's Conv1D
// weights are [in, out] in memory, ParamSpec::matrix says which):
//   Original       max(1, fan_out/fan_in)^0.5             (Keller Jordan's; lr ≈ 0.02)
//   MatchRmsAdamW  0.2·sqrt(max(fan_out, fan_in))         (Moonlight's: the update's RMS is
//                  AdamW's typical 0.2, so AdamW's lr and weight decay carry over unchanged)
// MatchRmsAdamW is the default: a run switches from --optimizer adamw to muon keeping its --lr,
// schedule and --weight-decay, and one learning rate serves both groups.
//
// The step is written once over the backend's ops (muon_momentum, sum_squares, scale, cast,
// matmul, muon_update, adamw): it runs on the CPU and the GPU alike. Under ZeRO-1 every matrix
// must lie whole in one rank's shard (muon_whole_ranges: DataParallel cuts only between them).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "optim/adamw.h"
#include "optim/optimizer.h"
#include "precision/policy.h"

namespace mptrain {

enum class MuonLrAdjust { Original, MatchRmsAdamW };
const char* muon_adjust_name(MuonLrAdjust a);  // "original", "match_rms_adamw" (torch.optim.Muon's)
MuonLrAdjust parse_muon_adjust(const std::string& name);  // throws Error naming the choices

// Attention's query, key and value weights: orthogonalised as one [3C, C] matrix or as three [C, C].
enum class MuonQkv { One, Three };
const char* muon_qkv_name(MuonQkv q);  // "one", "three"
MuonQkv parse_muon_qkv(const std::string& name);

struct MuonHyper {
  float momentum = 0.95f;
  bool nesterov = true;
  int ns_steps = 5;
  MuonLrAdjust adjust = MuonLrAdjust::MatchRmsAdamW;
  MuonQkv qkv = MuonQkv::Three;
  float adamw_lr_ratio = 1.0f;              // the AdamW group's learning rate over the matrices'
  ComputeType ns_math = ComputeType::BF16;  // the policy's rule(NewtonSchulz).compute
};

// Throws Error naming the offending flag (--muon-momentum, --muon-ns-steps, --muon-adamw-lr, ...).
void validate(const MuonHyper& hyper);

// One matrix Muon orthogonalises on its own: a hidden weight, or q, k or v inside a fused one.
struct MuonMatrix {
  std::string name;                    // the tensor's name; "<name>[q|k|v]" for a part of a fused weight
  size_t offset = 0;                   // of element (0, 0) in the flat buffer
  int64_t rows = 0, cols = 0, ld = 0;  // as stored; ld: elements from one row to the next
  int64_t fan_out = 0, fan_in = 0;     // as a layer: out × in
};
// The matrices of a table, in table order. Throws Error for a matrix that is not whole in it (a
// ZeRO-1 shard that cut one) or, with MuonQkv::One, q, k, v that are not all three there.
std::vector<MuonMatrix> muon_matrices(const ParamTable& table, MuonQkv qkv);
// The [begin, end) ranges a ZeRO-1 shard must hold whole: every matrix's tensor(s).
std::vector<ParamRange> muon_whole_ranges(const ParamTable& table, MuonQkv qkv);
// The update's scale s for a matrix (see above).
float muon_lr_scale(const MuonMatrix& m, MuonLrAdjust adjust);

class Muon : public Optimizer {
 public:
  // State: "momentum_buffer" (torch.optim.Muon's name) for the matrices, AdamW's "exp_avg" and
  // "exp_avg_sq" for the rest.
  Muon(const ParamTable& table, const MuonHyper& hyper, const AdamWHyper& adamw, Backend& be);

  OptimizerKind kind() const override { return OptimizerKind::Muon; }
  using Optimizer::step;
  void step(float* params, const float* grads, float lr, int64_t t, float grad_scale) override;

  const std::vector<MuonMatrix>& matrices() const { return matrices_; }
  const MuonHyper& hyper() const { return hyper_; }

 private:
  // A contiguous run of tensors AdamW updates with one decay setting.
  struct AdamWRun {
    size_t begin = 0, end = 0;
    bool decay = false;
  };
  void adamw_step(float* params, const float* grads, float lr, int64_t t, float grad_scale);
  // NS5 of u (fp32 [rows, cols], normalised in place); returns the result, in x_ or y_ (or u).
  View orthogonalize(const View& u);

  MuonHyper hyper_;
  AdamWHyper adamw_;
  std::vector<MuonMatrix> matrices_;
  std::vector<AdamWRun> adamw_runs_;
  StorageType ns_storage_;
  FloatBuffer u_, x_, y_, a_, b_;  // the largest matrix's working set (x, y, a, b in ns_storage_)
};

}  // namespace mptrain
