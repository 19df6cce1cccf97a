// Selective recomputation (--recompute SET): which activations the backward recomputes, through
// the same ops the forward ran, instead of keeping them for the whole step. Every op is
// deterministic for the same inputs and thread count, so the recomputed tensors and therefore the
// gradients have the bits of keeping them; what changes is the memory (the recomputed tensors
// share one buffer across layers) and the time (the ops run twice).
//   gelu   the MLP's GELU output (its input, the fc output, stays saved): GELU again
//   norm   the norms' outputs (their statistics stay saved): the norm again
//   attention  what the attention keeps for its backward (on the CPU its probabilities, B·NH·T² a
//          layer; flash attention keeps only the rows' log-sum-exps): the attention's forward again
//          from the saved q, k, v, rewriting its output with the same bits
//   mlp    the MLP's input product and its activation (the largest tensors of a block): the
//          product again
//   block  everything inside a block but its output: the block's whole forward again
//          (PyTorch's checkpoint per block)
// `none` keeps everything (the default). What each family's pass refills:
//   GPT-2  every choice
//   Llama  norm, mlp, block (its activation is SwiGLU or ReLU², which mlp recomputes with its input)
//   BERT   gelu, mlp (post-LN: its LayerNorm outputs are the residual stream the next layer reads,
//          kept either way, and its block's attention half reads them)
#pragma once
#include <string>
#include <vector>

namespace mptrain {

enum class Recompute : unsigned { Norm = 1u, Mlp = 2u, Block = 4u, Gelu = 8u, Attention = 16u };

struct RecomputeSet {
  unsigned bits = 0;
  bool has(Recompute r) const { return (bits & static_cast<unsigned>(r)) != 0; }
  bool none() const { return bits == 0; }
  RecomputeSet with(Recompute r) const { return {bits | static_cast<unsigned>(r)}; }
  bool operator==(const RecomputeSet&) const = default;
};

enum class RecomputeFamily { Gpt2, Llama, Bert };

// "none", or a comma list of gelu, norm, attention, mlp, block ("norm,mlp"). Error naming the accepted names
// for anything else (and for none in a list).
RecomputeSet parse_recompute(const std::string& text);
// Error (one line: the choice, why the family has none, what it recomputes) for a set with a
// choice the family's pass does not refill.
void check_recompute(RecomputeSet set, RecomputeFamily family);
// The canonical text: "none" or the names in the order above, comma-separated.
std::string recompute_name(RecomputeSet set);
// The family's single choices, for `explain`'s table: none, then each it refills.
std::vector<RecomputeSet> recompute_singles(RecomputeFamily family);
// The option's value, as --help shows it.
inline constexpr const char* kRecomputeOptionText = "{none,gelu,norm,attention,mlp,block}";
// The sets --batch auto tries, in the order of the work they add: nothing, the GELU (elementwise,
// the largest tensor of a block), the norms (elementwise), both, the attention (its two T²
// products, 2·C·T FLOPs a token: fewer than the MLP's 8·C² below T = 4·C), that with both, the
// MLP's input product (with its activation) and the norms, that with the attention, a block's
// forward; those the family refills.
std::vector<RecomputeSet> recompute_sets_by_cost(RecomputeFamily family);

}  // namespace mptrain
