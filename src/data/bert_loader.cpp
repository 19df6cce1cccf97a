// BERT batches: instance order per epoch, rank slicing, padding and dynamic masking.
#include "data/bert_loader.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/rng_int.h"

namespace mptrain {

namespace {

// Streams of the counter-based RNG (core/rng.h), so that orders and masks never share draws.
constexpr uint64_t kOrderStream = 0x6f72646572ull;  // "order"
constexpr uint64_t kMaskStream = 0x6d61736bull;     // "mask"

double unit(uint64_t r) { return static_cast<double>(r >> 11) * (1.0 / 9007199254740992.0); }

}  // namespace

void bert_mask_instance(std::span<const uint16_t> tokens, const WordpieceVocab& vocab,
                        const std::vector<int>& random_pool, const BertMaskingOptions& opt, uint64_t epoch,
                        uint64_t instance, int* input, int* labels) {
  const BertSpecialIds& sp = vocab.special();
  std::vector<int> cand;
  cand.reserve(tokens.size());
  for (size_t k = 0; k < tokens.size(); ++k) {
    input[k] = tokens[k];
    labels[k] = kMlmIgnoreLabel;
    if (tokens[k] != sp.cls && tokens[k] != sp.sep && tokens[k] != sp.pad)
      cand.push_back(static_cast<int>(k));
  }
  if (cand.empty()) return;
  const int n = std::min<int>(
      opt.max_predictions,
      std::max(1, static_cast<int>(std::lround(static_cast<double>(cand.size()) * opt.mask_prob))));
  // One stream per (epoch, instance); draw j of it is bits64(seed, stream, j).
  const uint64_t stream = mix64(kMaskStream ^ mix64(epoch)) + instance;
  uint64_t draw = 0;
  auto next = [&]() { return bits64(opt.seed, stream, draw++); };
  // Partial Fisher-Yates: the first n of cand become a uniform sample without replacement.
  for (int j = 0; j < n; ++j) {
    const size_t pick = j + below(next(), cand.size() - j);
    std::swap(cand[j], cand[pick]);
    const int pos = cand[j];
    labels[pos] = tokens[pos];
    const double u = unit(next());
    const uint64_t r = next();  // drawn always, so the stream does not depend on the branch
    if (u < opt.mask_token_prob)
      input[pos] = sp.mask;
    else if (u < opt.mask_token_prob + opt.random_token_prob && !random_pool.empty())
      input[pos] = random_pool[below(r, random_pool.size())];
    // else: unchanged
  }
}

BertLoader::BertLoader(const std::string& path, int B, int T, int vocab_size, const BertMaskingOptions& opt,
                       int rank, int world)
    : file_(path), B_(B), T_(T), rank_(rank), world_(world), opt_(opt) {
  MPT_CHECK(B > 0 && T > 0, "bert loader: batch size and sequence length must be positive");
  MPT_CHECK(world > 0 && rank >= 0 && rank < world, "bert loader: bad rank/world");
  MPT_CHECK(opt.mask_prob > 0 && opt.mask_prob < 1, "bert loader: the masking probability must be in (0, 1)");
  MPT_CHECK(opt.max_predictions >= 1, "bert loader: max predictions per sequence must be at least 1");
  MPT_CHECK(opt.mask_token_prob >= 0 && opt.random_token_prob >= 0 &&
                opt.mask_token_prob + opt.random_token_prob <= 1,
            "bert loader: [MASK] and random-token probabilities must be >= 0 and sum to at most 1");
  if (file_.max_seq_len() > T)
    throw Error("instance file '" + path + "' has max_seq_len " + std::to_string(file_.max_seq_len()) +
                ", more than the model's " + std::to_string(T) +
                " positions; prepare it with --max-seq-len " + std::to_string(T) +
                " or use a longer sequence");
  if (file_.vocab().size() > vocab_size)
    throw Error("instance file '" + path + "' uses a vocabulary of " + std::to_string(file_.vocab().size()) +
                " tokens, more than the model's " + std::to_string(vocab_size));
  const size_t need = static_cast<size_t>(B) * world;
  if (file_.size() < need)
    throw Error("instance file '" + path + "' holds " + std::to_string(file_.size()) +
                " instances, fewer than one global batch of " + std::to_string(need) +
                "; use a smaller batch or more data");
  for (int id = 0; id < file_.vocab().size(); ++id)
    if (!file_.vocab().is_special(id)) random_pool_.push_back(id);
  build_order(0);
}

void BertLoader::build_order(int64_t epoch) {
  if (order_epoch_ == epoch) return;
  const size_t n = file_.size();
  order_.resize(n);
  for (size_t i = 0; i < n; ++i) order_[i] = static_cast<uint32_t>(i);
  if (opt_.shuffle)
    shuffle_counter_based(std::span<uint32_t>(order_), opt_.seed, kOrderStream + static_cast<uint64_t>(epoch));
  order_epoch_ = epoch;
}

void BertLoader::set_position(const BertLoaderPosition& pos) {
  MPT_CHECK(pos.index >= 0 && pos.epoch >= 0 && static_cast<size_t>(pos.index) <= file_.size(),
            "bert loader position (index " + std::to_string(pos.index) + ", epoch " +
                std::to_string(pos.epoch) + ") does not fit the " + std::to_string(file_.size()) +
                " instances of '" + file_.path() + "'; was the checkpoint made with other data?");
  pos_ = pos;
  build_order(pos.epoch);
}

void unpad(BertBatch& batch) {
  MPT_CHECK(batch.cu_seqlens.empty(), "unpad: the batch is unpadded already");
  batch.cu_seqlens.assign(static_cast<size_t>(batch.B) + 1, 0);
  size_t to = 0;
  for (int b = 0; b < batch.B; ++b) {
    const size_t from = static_cast<size_t>(b) * batch.T, len = static_cast<size_t>(batch.lengths[b]);
    for (std::vector<int>* v : {&batch.input_ids, &batch.token_type_ids, &batch.mlm_labels})
      std::copy_n(v->begin() + static_cast<std::ptrdiff_t>(from), len,
                  v->begin() + static_cast<std::ptrdiff_t>(to));
    to += len;
    batch.cu_seqlens[static_cast<size_t>(b) + 1] = static_cast<int>(to);
  }
  for (std::vector<int>* v : {&batch.input_ids, &batch.token_type_ids, &batch.mlm_labels}) v->resize(to);
  batch.attention_mask.clear();
}

void BertLoader::next(BertBatch& batch) {
  const size_t global = static_cast<size_t>(B_) * world_;
  if (static_cast<size_t>(pos_.index) + global > file_.size()) {
    pos_.index = 0;
    ++pos_.epoch;
  }
  build_order(pos_.epoch);
  const size_t BT = static_cast<size_t>(B_) * T_;
  batch.B = B_;
  batch.T = T_;
  const BertSpecialIds& sp = file_.vocab().special();
  batch.input_ids.assign(BT, sp.pad);
  batch.token_type_ids.assign(BT, 0);
  batch.attention_mask.assign(BT, 0);
  batch.mlm_labels.assign(BT, kMlmIgnoreLabel);
  batch.nsp_labels.assign(B_, 0);
  batch.lengths.assign(B_, 0);
  batch.cu_seqlens.clear();
  batch.num_masked = 0;
  for (int b = 0; b < B_; ++b) {
    const size_t inst = order_[static_cast<size_t>(pos_.index) + static_cast<size_t>(rank_) * B_ + b];
    const auto tokens = file_.tokens(inst);
    const int len = static_cast<int>(tokens.size());
    const size_t row = static_cast<size_t>(b) * T_;
    bert_mask_instance(tokens, file_.vocab(), random_pool_, opt_, static_cast<uint64_t>(pos_.epoch), inst,
                       &batch.input_ids[row], &batch.mlm_labels[row]);
    const int a_end = file_.first_sep(inst);
    for (int t = 0; t < len; ++t) {
      batch.attention_mask[row + t] = 1;
      batch.token_type_ids[row + t] = t > a_end ? 1 : 0;
      batch.num_masked += batch.mlm_labels[row + t] != kMlmIgnoreLabel;
    }
    batch.nsp_labels[b] = file_.nsp_label(inst);
    batch.lengths[b] = len;
  }
  pos_.index += static_cast<int64_t>(global);
}

}  // namespace mptrain
