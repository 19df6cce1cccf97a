// Selective recomputation (--recompute SET): which activations the backward recomputes, through
// the same ops the forward ran, instead of keeping them for the whole step. Every op is
// deterministic for the same inputs and thread count, so the recomputed tensors and therefore the
// gradients have the bits of keeping them; what changes is the memory (the recomputed tensors
// share one buffer across layers) and the time (the ops run twice).
//   gelu   the MLP's GELU output (its input, the fc output, stays saved): GELU again
//   norm   the LayerNorm outputs (ln1, ln2): their statistics stay saved; LayerNorm again
//   mlp    the MLP's fc output and its GELU (the largest tensors of a block): the fc linear again
//   block  everything inside a block but its output: the block's whole forward again
//          (PyTorch's checkpoint per block)
// `none` keeps everything (the default). GPT-2 and the Llama family (norm, mlp, block: its
// activation is SwiGLU or ReLU², which mlp recomputes with its input product); BERT refuses a set.
#pragma once
#include <string>
#include <vector>

namespace mptrain {

enum class Recompute : unsigned { Norm = 1u, Mlp = 2u, Block = 4u, Gelu = 8u };

struct RecomputeSet {
  unsigned bits = 0;
  bool has(Recompute r) const { return (bits & static_cast<unsigned>(r)) != 0; }
  bool none() const { return bits == 0; }
  RecomputeSet with(Recompute r) const { return {bits | static_cast<unsigned>(r)}; }
  bool operator==(const RecomputeSet&) const = default;
};

// "none", or a comma list of gelu, norm, mlp, block ("norm,mlp"). Error naming the accepted names for
// anything else (and for none in a list).
RecomputeSet parse_recompute(const std::string& text);
// For the families that keep every activation: Error "--recompute <set>: <family> keeps every
// activation so far (GPT-2 recomputes)" unless the set is none.
void refuse_recompute(RecomputeSet set, const char* family);
// For a family whose MLP has no GELU (Llama): Error on a set with `gelu`, naming what does the same.
void refuse_gelu_recompute(RecomputeSet set, const char* family);
// The canonical text: "none" or the names in the order above, comma-separated.
std::string recompute_name(RecomputeSet set);
// Every single choice, for `explain`'s table: none, gelu, norm, mlp, block.
inline constexpr Recompute kRecomputeChoices[] = {Recompute::Gelu, Recompute::Norm, Recompute::Mlp, Recompute::Block};
// The option's value, as --help shows it.
inline constexpr const char* kRecomputeOptionText = "{none,gelu,norm,mlp,block}";
// The sets --batch auto tries, in the order of the work they add: nothing, the GELU (elementwise,
// the largest tensor of a block), the LayerNorms (elementwise), both, the fc linear (with its
// GELU), the fc linear and the LayerNorms, a block's forward.
// Without gelu for a family that has none.
std::vector<RecomputeSet> recompute_sets_by_cost(bool with_gelu = true);

}  // namespace mptrain
