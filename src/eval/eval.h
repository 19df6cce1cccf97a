// Evaluating a GPT-2: mean loss and perplexity over token shards, and multiple-choice
// completion scoring in HellaSwag's jsonl format (the usual GPT-2 HellaSwag evaluation).
//
// Multiple choice: for each ending, tokens = encode(context) + encode(" " + ending); the
// model's loss is summed over the ending's tokens only (each predicted from everything before
// it). The prediction is the ending with the lowest summed loss ("acc", the sum of
// log-likelihoods) and, separately, the lowest loss per ending token ("acc_norm", the
// completion-normalised average log-likelihood).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/gpt2_tokenizer.h"
#include "data/loader.h"
#include "eval/hellaswag.h"
#include "model/causal_lm.h"

namespace mptrain {

struct LossEval {
  double loss = 0.0;        // mean over batches of each batch's mean token loss
  double perplexity = 0.0;  // exp(loss)
  int64_t batches = 0;
  int64_t tokens = 0;  // predicted tokens
};

// The number of B×T windows in one pass over the shards matching `pattern` (what TokenLoader
// takes from each shard: a window needs B·T + 1 tokens).
int64_t windows_per_pass(const std::string& pattern, int B, int T);

// The first `batches` windows of the loader (reset to its start; shards in name order; more
// than one pass wraps around, as training does). Plans the model for the loader's B×T unless
// its plan already covers that.
LossEval evaluate_loss(CausalLm& model, TokenLoader& loader, int64_t batches);

struct McScore {
  std::vector<double> sum_loss;   // per ending: −log p(ending | context), summed over its tokens
  std::vector<double> mean_loss;  // per ending: sum_loss / its number of tokens
  std::vector<int> ending_tokens;
  int pred_sum = 0, pred_norm = 0;
};

struct McResult {
  int64_t examples = 0, correct_sum = 0, correct_norm = 0;
  double acc() const { return examples ? static_cast<double>(correct_sum) / examples : 0.0; }
  double acc_norm() const { return examples ? static_cast<double>(correct_norm) / examples : 0.0; }
};

// An example as token rows, one per ending: context (cut from the left to fit the model's
// context) + ending.
struct McTokens {
  McExample example;
  std::vector<std::vector<int>> rows;
  std::vector<int> ending_len;  // the last ending_len[k] tokens of rows[k] are scored
};

// Tokenises every example, so that bad input fails before any time is spent scoring: an
// ending too long for the model's context, or a model whose vocabulary is not GPT-2's, is an
// Error (naming the example's line).
std::vector<McTokens> tokenize_multiple_choice(const Gpt2Tokenizer& tokenizer, int vocab_size, int block_size,
                                               const std::vector<McExample>& examples);

// Plans the model once for the longest example, then scores the examples in order, one
// forward pass each (a batch of its endings). `on_example` (may be empty) sees each example's
// score and the running totals; `scores`, when given, receives every example's score.
using McCallback = std::function<void(const McExample&, const McScore&, const McResult&)>;
McResult evaluate_multiple_choice(CausalLm& model, const std::vector<McTokens>& items,
                                  const McCallback& on_example, std::vector<McScore>* scores = nullptr);

}  // namespace mptrain
