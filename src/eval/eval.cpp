// Loss/perplexity on token shards and HellaSwag-style multiple-choice scoring.
#include "eval/eval.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "data/loader.h"
#include "data/shard.h"

namespace mptrain {

namespace {

void ensure_plan(CausalLm& model, int B, int T) {
  if (model.planned_batch() < B || model.planned_seq() < T) model.plan(B, T);
}

}  // namespace

int64_t windows_per_pass(const std::string& pattern, int B, int T) {
  const size_t window = static_cast<size_t>(B) * T;
  int64_t n = 0;
  for (const auto& path : glob_shards(pattern)) {
    const size_t size = Shard(path).size();
    n += size > window ? static_cast<int64_t>((size - 1) / window) : 0;
  }
  return n;
}

LossEval evaluate_loss(CausalLm& model, TokenLoader& loader, int64_t batches) {
  MPT_CHECK(batches > 0, "the number of evaluation batches must be positive, got " + std::to_string(batches));
  const int B = loader.B(), T = loader.T();
  ensure_plan(model, B, T);
  loader.reset();
  std::vector<int> inputs(static_cast<size_t>(B) * T), targets(inputs.size());
  double sum = 0.0;  // in batch order: the same result for the same data and thread count
  for (int64_t i = 0; i < batches; ++i) {
    loader.next(inputs.data(), targets.data());
    sum += model.forward(inputs.data(), targets.data(), B, T);
  }
  LossEval r;
  r.batches = batches;
  r.tokens = batches * B * T;
  r.loss = sum / static_cast<double>(batches);
  r.perplexity = std::exp(r.loss);
  return r;
}

std::vector<McTokens> tokenize_multiple_choice(const Gpt2Tokenizer& tokenizer, int vocab_size, int block_size,
                                               const std::vector<McExample>& examples) {
  MPT_CHECK(tokenizer.vocab_size() <= vocab_size,
            "the model's vocabulary (" + std::to_string(vocab_size) + ") is smaller than GPT-2's (" +
                std::to_string(tokenizer.vocab_size()) + "); it was not trained on GPT-2 tokens");
  std::vector<McTokens> out;
  out.reserve(examples.size());
  Gpt2Encoder encoder(tokenizer);
  std::vector<int> context, ending;
  for (const McExample& ex : examples) {
    McTokens item;
    item.example = ex;
    context.clear();
    encoder.encode(ex.context, context);
    if (context.empty()) context.push_back(tokenizer.eot());  // the first ending token needs a predecessor
    for (size_t k = 0; k < ex.endings.size(); ++k) {
      ending.clear();
      encoder.encode(" " + ex.endings[k], ending);
      if (static_cast<int>(ending.size()) >= block_size)
        throw Error("example on line " + std::to_string(ex.line) + ": ending " + std::to_string(k) + " is " +
                    std::to_string(ending.size()) + " tokens, too long for the model's context of " +
                    std::to_string(block_size));
      const size_t keep = std::min(context.size(), static_cast<size_t>(block_size) - ending.size());
      std::vector<int> row(context.end() - static_cast<std::ptrdiff_t>(keep), context.end());
      row.insert(row.end(), ending.begin(), ending.end());
      item.rows.push_back(std::move(row));
      item.ending_len.push_back(static_cast<int>(ending.size()));
    }
    out.push_back(std::move(item));
  }
  return out;
}

McResult evaluate_multiple_choice(CausalLm& model, const std::vector<McTokens>& items,
                                  const McCallback& on_example, std::vector<McScore>* scores) {
  int max_B = 1, max_T = 2;
  for (const auto& item : items) {
    max_B = std::max(max_B, static_cast<int>(item.rows.size()));
    for (const auto& row : item.rows) max_T = std::max(max_T, static_cast<int>(row.size()));
  }
  ensure_plan(model, max_B, max_T);

  McResult result;
  std::vector<int> tokens, targets;
  for (const McTokens& item : items) {
    const int B = static_cast<int>(item.rows.size());
    int T = 2;
    for (const auto& row : item.rows) T = std::max(T, static_cast<int>(row.size()));
    tokens.assign(static_cast<size_t>(B) * T, 0);  // padding after a row's end cannot affect it (causal)
    targets.assign(tokens.size(), -1);
    for (int b = 0; b < B; ++b) {
      const auto& row = item.rows[b];
      const int len = static_cast<int>(row.size()), start = len - item.ending_len[b];
      std::copy(row.begin(), row.end(), tokens.begin() + static_cast<std::ptrdiff_t>(b) * T);
      for (int t = start - 1; t < len - 1; ++t) targets[static_cast<size_t>(b) * T + t] = row[t + 1];
    }
    model.forward(tokens.data(), targets.data(), B, T);
    const float* losses = model.losses();
    McScore s;
    for (int b = 0; b < B; ++b) {
      double sum = 0.0;
      for (int t = 0; t < T; ++t)
        if (targets[static_cast<size_t>(b) * T + t] >= 0) sum += losses[static_cast<size_t>(b) * T + t];
      s.sum_loss.push_back(sum);
      s.mean_loss.push_back(sum / item.ending_len[b]);
      s.ending_tokens.push_back(item.ending_len[b]);
    }
    s.pred_sum =
        static_cast<int>(std::min_element(s.sum_loss.begin(), s.sum_loss.end()) - s.sum_loss.begin());
    s.pred_norm =
        static_cast<int>(std::min_element(s.mean_loss.begin(), s.mean_loss.end()) - s.mean_loss.begin());
    ++result.examples;
    result.correct_sum += s.pred_sum == item.example.label;
    result.correct_norm += s.pred_norm == item.example.label;
    if (on_example) on_example(item.example, s, result);
    if (scores) scores->push_back(std::move(s));
  }
  return result;
}

}  // namespace mptrain
