// BERT instance files and the masking loader on synthetic instances: the file round
// trip and its validation (bad magic, another version, truncation, out-of-range ids),
// the batch layout (padding, token types, attention mask, labels), the masking
// statistics (15% of maskable tokens; 80/10/10) within computed sampling bounds,
// specials and padding never masked, resume and rank slicing giving identical batches.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/rng.h"
#include "data/bert_instances.h"
#include "data/bert_loader.h"
#include "data/data_test_util.h"

namespace mptrain {
namespace {

using data_test::error_of;
using data_test::TempDir;

// [PAD] [unused0..4] [UNK] [CLS] [SEP] [MASK] w0..w(n-1): ordinary ids start at 9.
WordpieceVocab synthetic_vocab(int words = 200) {
  std::vector<std::string> t = {"[PAD]"};
  for (int i = 0; i < 5; ++i) t.push_back("[unused" + std::to_string(i) + "]");
  for (const char* s : {"[UNK]", "[CLS]", "[SEP]", "[MASK]"}) t.push_back(s);
  for (int i = 0; i < words; ++i) t.push_back("w" + std::to_string(i));
  return WordpieceVocab::from_tokens(t, "synthetic");
}
constexpr int kFirstWord = 10;

// n instances with lengths between 5 and max_len, deterministic from (seed, i).
std::vector<BertInstance> synthetic_instances(const WordpieceVocab& v, size_t n, int max_len,
                                              uint64_t seed = 7) {
  std::vector<BertInstance> out(n);
  const auto& sp = v.special();
  const int words = v.size() - kFirstWord;
  for (size_t i = 0; i < n; ++i) {
    const int len = 5 + static_cast<int>(mix64(seed + i) % static_cast<uint64_t>(max_len - 4));
    const int a_len = 1 + static_cast<int>(mix64(seed * 3 + i) % static_cast<uint64_t>(len - 4));
    auto& t = out[i].tokens;
    t.push_back(static_cast<uint16_t>(sp.cls));
    for (int k = 0; k < len - 3; ++k) {
      if (k == a_len) t.push_back(static_cast<uint16_t>(sp.sep));
      t.push_back(
          static_cast<uint16_t>(kFirstWord + mix64(seed + i * 131 + k) % static_cast<uint64_t>(words)));
    }
    t.push_back(static_cast<uint16_t>(sp.sep));
    out[i].nsp_label = static_cast<uint8_t>(i % 2);
  }
  return out;
}

std::string write_file(const TempDir& dir, const WordpieceVocab& v, const std::vector<BertInstance>& inst,
                       uint32_t max_seq_len, const std::string& name = "x.bert") {
  const std::string path = dir / name;
  write_bert_instances(path, v, inst, {.max_seq_len = max_seq_len, .dupe_factor = 1, .num_documents = 1});
  return path;
}

std::string read_all(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(BertInstances, RoundTrip) {
  TempDir dir;
  const auto v = synthetic_vocab();
  const auto inst = synthetic_instances(v, 50, 40);
  BertInstanceFile f(write_file(dir, v, inst, 40));
  ASSERT_EQ(f.size(), 50u);
  EXPECT_EQ(f.max_seq_len(), 40);
  EXPECT_EQ(f.vocab().size(), v.size());
  EXPECT_EQ(f.vocab().special().mask, 9);
  for (size_t i = 0; i < inst.size(); ++i) {
    const auto t = f.tokens(i);
    ASSERT_EQ(std::vector<uint16_t>(t.begin(), t.end()), inst[i].tokens);
    EXPECT_EQ(f.nsp_label(i), inst[i].nsp_label);
    EXPECT_EQ(t[f.first_sep(i)], v.special().sep);
  }
}

TEST(BertInstances, ClearErrors) {
  TempDir dir;
  const auto v = synthetic_vocab();
  const std::string good = write_file(dir, v, synthetic_instances(v, 20, 30), 30);
  const std::string bytes = read_all(good);
  auto variant = [&](const std::string& name, std::string b) {
    data_test::write_bytes(dir / name, b);
    return error_of([&] { BertInstanceFile f(dir / name); });
  };
  std::string b = bytes;
  b[0] = 'X';
  EXPECT_NE(variant("magic.bert", b).find("not a BERT instance file"), std::string::npos);
  b = bytes;
  const uint32_t v2 = 2;
  std::memcpy(&b[8], &v2, 4);
  EXPECT_NE(variant("v2.bert", b).find("v2.bert has format version 2, expected 1"), std::string::npos);
  EXPECT_NE(variant("short.bert", bytes.substr(0, bytes.size() - 3)).find("is truncated"), std::string::npos);
  EXPECT_NE(variant("tiny.bert", bytes.substr(0, 100)).find("is truncated"), std::string::npos);
  // An id past the vocabulary in the last token before the final [SEP].
  b = bytes;
  const uint16_t bad = static_cast<uint16_t>(v.size() + 5);
  std::memcpy(&b[b.size() - 4], &bad, 2);
  EXPECT_NE(variant("id.bert", b).find("out of range for a vocabulary of"), std::string::npos);
  // The writer refuses a malformed instance.
  auto inst = synthetic_instances(v, 3, 20);
  inst[1].tokens.pop_back();
  EXPECT_NE(
      error_of([&] { write_file(dir, v, inst, 20, "bad.bert"); }).find("instance 1 does not end with [SEP]"),
      std::string::npos);
  inst = synthetic_instances(v, 3, 20);
  EXPECT_NE(
      error_of([&] { write_file(dir, v, inst, 10, "long.bert"); }).find("more than the file's max_seq_len"),
      std::string::npos);
}

TEST(BertLoader, BatchLayout) {
  TempDir dir;
  const auto v = synthetic_vocab();
  const auto inst = synthetic_instances(v, 64, 24);
  const std::string path = write_file(dir, v, inst, 24);
  BertLoader loader(path, 8, 32, v.size(), {.shuffle = false});
  BertBatch batch;
  for (int step = 0; step < 8; ++step) {
    loader.next(batch);
    ASSERT_EQ(batch.input_ids.size(), 8u * 32);
    int64_t masked = 0;
    for (int b = 0; b < 8; ++b) {
      const auto& src = inst[static_cast<size_t>(step * 8 + b)];
      const int len = static_cast<int>(src.tokens.size());
      EXPECT_EQ(batch.lengths[b], len);
      EXPECT_EQ(batch.nsp_labels[b], src.nsp_label);
      bool in_b = false;
      for (int t = 0; t < 32; ++t) {
        const size_t i = static_cast<size_t>(b) * 32 + t;
        if (t >= len) {  // padding: never attended, never labelled
          EXPECT_EQ(batch.input_ids[i], v.special().pad);
          EXPECT_EQ(batch.attention_mask[i], 0);
          EXPECT_EQ(batch.token_type_ids[i], 0);
          EXPECT_EQ(batch.mlm_labels[i], kMlmIgnoreLabel);
          continue;
        }
        const int orig = src.tokens[static_cast<size_t>(t)];
        EXPECT_EQ(batch.attention_mask[i], 1);
        EXPECT_EQ(batch.token_type_ids[i], in_b ? 1 : 0);
        if (orig == v.special().sep) in_b = true;
        if (orig == v.special().cls || orig == v.special().sep) {
          EXPECT_EQ(batch.input_ids[i], orig);
          EXPECT_EQ(batch.mlm_labels[i], kMlmIgnoreLabel);
        } else if (batch.mlm_labels[i] != kMlmIgnoreLabel) {
          EXPECT_EQ(batch.mlm_labels[i], orig);
          ++masked;
        } else {
          EXPECT_EQ(batch.input_ids[i], orig);
        }
      }
      EXPECT_EQ(batch.token_type_ids[static_cast<size_t>(b) * 32 + len - 1], 1);  // the last [SEP]
    }
    EXPECT_EQ(batch.num_masked, masked);
  }
}

// Masking statistics over 20,000 instances against binomial bounds: each check allows
// 5 standard deviations (a false failure has probability ~6e-7 per check), far below
// the deviations a wrong rule would make.
// The masking rule at one rate (`mask_prob`): the exact count per instance, 80/10/10, uniform
// positions.
void check_masking_statistics(double rate_wanted) {
  TempDir dir;
  const auto v = synthetic_vocab(300);
  const size_t n = 20000;
  const auto inst = synthetic_instances(v, n, 128, 99);
  const std::string path = write_file(dir, v, inst, 128);
  BertMaskingOptions opt;
  opt.mask_prob = rate_wanted;
  opt.max_predictions = 1000;  // no cap: n = round(rate * maskable) exactly
  BertLoader loader(path, 100, 128, v.size(), opt);
  BertBatch batch;
  int64_t cand = 0, predicted = 0, as_mask = 0, as_random = 0, unchanged = 0, expected_n = 0;
  int64_t first_cand_masked = 0, last_cand_masked = 0;
  for (size_t step = 0; step < n / 100; ++step) {
    loader.next(batch);
    for (int b = 0; b < 100; ++b) {
      int c = 0, first = -1, last = -1;
      for (int t = 0; t < batch.lengths[b]; ++t) {
        const size_t i = static_cast<size_t>(b) * 128 + t;
        const int label = batch.mlm_labels[i];
        const bool special_pos = t == 0 || t == batch.lengths[b] - 1 ||
                                 (label == kMlmIgnoreLabel && batch.input_ids[i] == v.special().sep);
        if (special_pos) continue;
        ++c;
        if (first < 0) first = t;
        last = t;
        if (label == kMlmIgnoreLabel) continue;
        ++predicted;
        const int in = batch.input_ids[i];
        ASSERT_FALSE(v.is_special(in) && in != v.special().mask) << "a special token as a random replacement";
        if (in == v.special().mask)
          ++as_mask;
        else if (in == label)
          ++unchanged;
        else
          ++as_random;
      }
      cand += c;
      expected_n += std::max<int64_t>(1, std::lround(rate_wanted * c));
      first_cand_masked += batch.mlm_labels[static_cast<size_t>(b) * 128 + first] != kMlmIgnoreLabel;
      last_cand_masked += batch.mlm_labels[static_cast<size_t>(b) * 128 + last] != kMlmIgnoreLabel;
    }
  }
  // The count per instance is exact.
  EXPECT_EQ(predicted, expected_n);
  // The rate of maskable tokens, up to the rounding of each instance's count (|error| <= 0.5 each).
  EXPECT_NEAR(double(predicted) / double(cand), rate_wanted, 0.5 * double(n) / double(cand));
  // 80/10/10: a random replacement equals the original with probability 1/300.
  const double N = double(predicted), q = 1.0 / 300;
  auto bound = [&](double p) { return 5 * std::sqrt(p * (1 - p) / N); };
  EXPECT_NEAR(as_mask / N, 0.8, bound(0.8));
  EXPECT_NEAR(as_random / N, 0.1 * (1 - q), bound(0.1));
  EXPECT_NEAR(unchanged / N, 0.1 + 0.1 * q, bound(0.1));
  // Positions are drawn uniformly: the first and last maskable tokens are predicted
  // with the instance's rate like any other (mean rate ~0.15 over n instances).
  const double rate = double(predicted) / double(cand), sd = std::sqrt(rate * (1 - rate) / double(n));
  EXPECT_NEAR(first_cand_masked / double(n), rate, 5 * sd + 0.01);
  EXPECT_NEAR(last_cand_masked / double(n), rate, 5 * sd + 0.01);
}

TEST(BertLoader, MaskingStatistics) { check_masking_statistics(0.15); }
TEST(BertLoader, MaskingStatisticsAtMosaicBertsThirtyPercent) { check_masking_statistics(0.30); }

// unpad() keeps every real token, type and label in order, sequence by sequence.
TEST(BertLoader, UnpadPacksTheRealTokensInOrder) {
  TempDir dir;
  const auto v = synthetic_vocab();
  const std::string path = write_file(dir, v, synthetic_instances(v, 40, 64, 5), 64);
  BertLoader loader(path, 8, 64, v.size());
  BertBatch padded;
  loader.next(padded);
  BertBatch packed = padded;
  unpad(packed);
  ASSERT_EQ(packed.cu_seqlens.size(), 9u);
  EXPECT_TRUE(packed.attention_mask.empty());
  EXPECT_EQ(packed.nsp_labels, padded.nsp_labels);
  for (int b = 0; b < 8; ++b) {
    ASSERT_EQ(packed.cu_seqlens[b + 1] - packed.cu_seqlens[b], padded.lengths[b]);
    for (int t = 0; t < padded.lengths[b]; ++t) {
      const size_t from = static_cast<size_t>(b) * 64 + t, to = static_cast<size_t>(packed.cu_seqlens[b] + t);
      EXPECT_EQ(packed.input_ids[to], padded.input_ids[from]);
      EXPECT_EQ(packed.token_type_ids[to], padded.token_type_ids[from]);
      EXPECT_EQ(packed.mlm_labels[to], padded.mlm_labels[from]);
    }
  }
  EXPECT_EQ(packed.input_ids.size(), static_cast<size_t>(packed.cu_seqlens.back()));
}

TEST(BertLoader, MaxPredictionsCapsAndOneAtLeast) {
  const auto v = synthetic_vocab();
  const auto inst = synthetic_instances(v, 200, 120, 3);
  std::vector<int> pool;
  for (int i = kFirstWord; i < v.size(); ++i) pool.push_back(i);
  BertMaskingOptions opt;
  opt.max_predictions = 5;
  for (size_t i = 0; i < inst.size(); ++i) {
    const auto& t = inst[i].tokens;
    std::vector<int> in(t.size()), lab(t.size());
    bert_mask_instance(t, v, pool, opt, 0, i, in.data(), lab.data());
    const int c = static_cast<int>(t.size()) - 3;
    const int got = static_cast<int>(std::count_if(lab.begin(), lab.end(), [](int l) { return l >= 0; }));
    EXPECT_EQ(got, std::min(5, std::max(1, static_cast<int>(std::lround(0.15 * c)))));
  }
}

TEST(BertLoader, ResumeAndEpochsAndRanks) {
  TempDir dir;
  const auto v = synthetic_vocab();
  const std::string path = write_file(dir, v, synthetic_instances(v, 103, 30), 30);
  auto run = [&](BertLoader& l, int steps) {
    std::vector<BertBatch> out(static_cast<size_t>(steps));
    for (auto& b : out) l.next(b);
    return out;
  };
  BertLoader a(path, 4, 32, v.size());
  const auto first = run(a, 60);  // 25 batches per epoch: crosses two epoch ends
  EXPECT_EQ(a.batches_per_epoch(), 25u);
  EXPECT_EQ(a.position().epoch, 2);
  // Resume from the position after step 37 in a fresh loader: identical batches, masks included.
  BertLoader b(path, 4, 32, v.size());
  run(b, 37);
  const BertLoaderPosition pos = b.position();
  BertLoader c(path, 4, 32, v.size());
  c.set_position(pos);
  const auto resumed = run(c, 23);
  for (int s = 0; s < 23; ++s) {
    EXPECT_EQ(resumed[s].input_ids, first[37 + s].input_ids) << "step " << 37 + s;
    EXPECT_EQ(resumed[s].mlm_labels, first[37 + s].mlm_labels);
    EXPECT_EQ(resumed[s].nsp_labels, first[37 + s].nsp_labels);
  }
  // Another epoch gives other masks (dynamic masking) and another order.
  EXPECT_NE(first[0].input_ids, first[25].input_ids);
  // Two ranks with B=2 together give the batch of one rank with B=4.
  BertLoader r0(path, 2, 32, v.size(), {}, 0, 2), r1(path, 2, 32, v.size(), {}, 1, 2);
  const auto h0 = run(r0, 30), h1 = run(r1, 30);
  for (int s = 0; s < 30; ++s) {
    std::vector<int> joined = h0[s].input_ids;
    joined.insert(joined.end(), h1[s].input_ids.begin(), h1[s].input_ids.end());
    EXPECT_EQ(joined, first[s].input_ids) << "step " << s;
    std::vector<int> labels = h0[s].mlm_labels;
    labels.insert(labels.end(), h1[s].mlm_labels.begin(), h1[s].mlm_labels.end());
    EXPECT_EQ(labels, first[s].mlm_labels);
  }
  // Another seed, other masks.
  BertMaskingOptions other;
  other.seed = 99;
  BertLoader d(path, 4, 32, v.size(), other);
  EXPECT_NE(run(d, 1)[0].input_ids, first[0].input_ids);
}

TEST(BertLoader, ClearErrors) {
  TempDir dir;
  const auto v = synthetic_vocab();
  const std::string path = write_file(dir, v, synthetic_instances(v, 10, 60), 64);
  EXPECT_NE(error_of([&] {
              BertLoader l(path, 2, 32, v.size());
            }).find("has max_seq_len 64, more than the model's 32 positions"),
            std::string::npos);
  EXPECT_NE(error_of([&] { BertLoader l(path, 2, 64, 100); }).find("more than the model's 100"),
            std::string::npos);
  EXPECT_NE(error_of([&] { BertLoader l(path, 11, 64, v.size()); }).find("fewer than one global batch"),
            std::string::npos);
  BertLoader ok(path, 2, 64, v.size());
  EXPECT_NE(error_of([&] { ok.set_position({.index = 11, .epoch = 0}); }).find("does not fit"),
            std::string::npos);
}

}  // namespace
}  // namespace mptrain
