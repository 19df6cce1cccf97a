// The precision roles: what the policy (precision/policy.h) has one dtype rule for. Every op of the
// interface names the role(s) whose rule decides its dtypes, in its own line of backend/op_list.h,
// so the policy and the op list speak one vocabulary: an op whose line names no role, or a role
// without a rule in make_policy, does not compile.
//
// Most roles are one op's (rmsnorm, rope, swiglu); the attention's one op has three (its two
// products and the softmax between them), and the linear op serves two (the layers, and the LM
// head whose logits the loss reads). `copy` is the rule of the ops that move values between the
// dtypes the other rules chose (casts, weight copies, gathered rows, widened gradients).
//
// The printed names are `mptrain explain`'s rows and `--op-precision`'s keys; a model prints the
// rows of the roles it uses, in this order.
#pragma once
#include <cstdint>

#define MPTRAIN_OP_ROLES(X)         \
  X(Embedding, "embedding")         \
  X(LayerNorm, "layernorm")         \
  X(RmsNorm, "rmsnorm")             \
  X(Linear, "linear")               \
  X(Rope, "rope")                   \
  X(AttnScores, "attn_scores")      \
  X(Softmax, "softmax")             \
  X(AttnValues, "attn_values")      \
  X(Gelu, "gelu")                   \
  X(Swiglu, "swiglu")               \
  X(Relu2, "relu2")                 \
  X(Residual, "residual")           \
  X(LmHead, "lm_head")              \
  X(Loss, "loss")                   \
  X(GradNorm, "grad_norm")          \
  X(Optimizer, "optimizer")         \
  X(NewtonSchulz, "newton_schulz")  \
  X(Copy, "copy")

namespace mptrain {

enum class OpRole {
#define MPTRAIN_ROLE_ENUMERATOR(e, name) e,
  MPTRAIN_OP_ROLES(MPTRAIN_ROLE_ENUMERATOR)
#undef MPTRAIN_ROLE_ENUMERATOR
};
#define MPTRAIN_ROLE_ONE(e, name) +1
inline constexpr int kNumOpRoles = 0 MPTRAIN_OP_ROLES(MPTRAIN_ROLE_ONE);
#undef MPTRAIN_ROLE_ONE

const char* role_name(OpRole role);  // "layernorm", "linear", "attn_scores", ...

// A set of roles, as op_list.h gives them to an op: role(OpRole::AttnScores) | role(...).
using RoleSet = std::uint32_t;
static_assert(kNumOpRoles <= 32, "RoleSet holds one bit a role");
constexpr RoleSet role(OpRole r) { return RoleSet{1} << static_cast<int>(r); }
constexpr bool has_role(RoleSet s, OpRole r) { return (s & role(r)) != 0; }

// Each role's bit under its own name, for op_list.h's role column ("Linear | LmHead"), read inside
// a class derived from this one so that the names find these members first.
struct RoleBits {
#define MPTRAIN_ROLE_BIT(e, name) static constexpr RoleSet e = role(OpRole::e);
  MPTRAIN_OP_ROLES(MPTRAIN_ROLE_BIT)
#undef MPTRAIN_ROLE_BIT
};

}  // namespace mptrain
