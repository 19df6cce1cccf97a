// BERT data preparation: the sentence splitter, create_pretraining_data's instance loop
// on synthetic documents (shapes, IsNext pairs are consecutive text of one document,
// NotNext B comes from another document, truncation), NSP balance on the default corpus
// (and the imbalance of the original rule there, the reason for the balanced default),
// the whole `prepare --task bert` (files, determinism, loader on its output), and the
// CLI's clear errors (a vocabulary without special tokens, an instance file of another
// version, a truncated one, a sequence length over the file's).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/test_util.h"
#include "core/error.h"
#include "data/bert_loader.h"
#include "data/bert_prepare.h"
#include "data/data_test_util.h"

namespace mptrain {
namespace {

using data_test::TempDir;

std::string joined(const std::vector<std::string>& v, const char* sep = " | ") {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

TEST(BertSentences, Splitter) {
  EXPECT_EQ(joined(split_sentences("Hello there. How are you? Fine!\n")),
            "Hello there. | How are you? | Fine!");
  // Lines are joined; a blank line ends a paragraph; an attribution line starts a sentence.
  EXPECT_EQ(joined(split_sentences("It was a dark\nand stormy night\n\nThe end\n\t\t-- Snoopy\n")),
            "It was a dark and stormy night | The end | -- Snoopy");
  // No cut after abbreviations and initials, inside numbers, or before a lower-case word.
  EXPECT_EQ(
      joined(split_sentences("Mr. Smith met Dr. Who at 3.14 p.m. sharp. J. R. R. Tolkien wrote. e.g. this")),
      "Mr. Smith met Dr. Who at 3.14 p.m. sharp. | J. R. R. Tolkien wrote. e.g. this");
  // Closing quotes and brackets stay with their sentence.
  EXPECT_EQ(joined(split_sentences("He said \"Stop.\" Then (he left.) \"Why?\" she asked...  OK")),
            "He said \"Stop.\" | Then (he left.) | \"Why?\" she asked... | OK");
  EXPECT_TRUE(split_sentences("  \n\n \t").empty());
}

// Documents whose token ids encode (document, position in the document), so every
// instance can be traced back: id = 10 + 1000*doc + position.
std::vector<std::vector<std::vector<uint16_t>>> traceable_docs(int docs, int sentences, int len) {
  std::vector<std::vector<std::vector<uint16_t>>> out(docs);
  for (int d = 0; d < docs; ++d) {
    int pos = 0;
    for (int s = 0; s < sentences + d % 3; ++s) {
      std::vector<uint16_t> sent;
      for (int k = 0; k < len + (s * 7 + d) % 5; ++k)
        sent.push_back(static_cast<uint16_t>(10 + 1000 * d + pos++));
      out[d].push_back(sent);
    }
  }
  return out;
}

TEST(BertInstancesFromDocuments, ShapesAndProvenance) {
  const auto docs = traceable_docs(20, 6, 9);
  const BertSpecialIds sp{.pad = 0, .unk = 1, .cls = 2, .sep = 3, .mask = 4};
  auto make = [&](double short_seq_prob) {
    std::vector<BertInstance> inst;
    uint64_t state = 0;
    for (int dupe = 0; dupe < 5; ++dupe)
      for (size_t d = 0; d < docs.size(); ++d)
        create_bert_instances(docs, d, 32, short_seq_prob, NspRule::kGoogle, sp, 42, state, inst);
    return inst;
  };
  const std::vector<BertInstance> inst = make(0.1);
  ASSERT_GT(inst.size(), 100u);
  size_t not_next = 0;
  for (const auto& x : inst) {
    const auto& t = x.tokens;
    ASSERT_LE(t.size(), 32u);
    ASSERT_EQ(t.front(), sp.cls);
    ASSERT_EQ(t.back(), sp.sep);
    const size_t sep = std::find(t.begin() + 1, t.end(), sp.sep) - t.begin();
    ASSERT_GE(sep, 2u);
    ASSERT_LE(sep + 2, t.size() - 1);
    const int doc_a = (t[1] - 10) / 1000, doc_b = (t[sep + 1] - 10) / 1000;
    // A is consecutive text of one document (truncation only trims its ends).
    for (size_t k = 2; k < sep; ++k) ASSERT_EQ(t[k], t[k - 1] + 1);
    if (x.nsp_label == 0) {  // IsNext: B continues A in the same document
      EXPECT_EQ(doc_a, doc_b);
      EXPECT_GT(t[sep + 1], t[sep - 1]);
      for (size_t k = sep + 2; k + 1 < t.size(); ++k) ASSERT_EQ(t[k], t[k - 1] + 1);
    } else {  // NotNext: B from another document
      EXPECT_NE(doc_a, doc_b);
      ++not_next;
    }
  }
  // Google's rule on 6-8 sentence documents: close to half NotNext, some short targets.
  EXPECT_GT(not_next, inst.size() * 4 / 10);
  EXPECT_LT(not_next, inst.size() * 7 / 10);
  // Shorter targets (short_seq_prob) make shorter instances.
  auto mean_length = [](const std::vector<BertInstance>& v) {
    double n = 0;
    for (const auto& x : v) n += double(x.tokens.size());
    return n / double(v.size());
  };
  EXPECT_LT(mean_length(make(1.0)), mean_length(make(0.0)) - 2);
}

std::string fortunes_dir() {
  return std::filesystem::exists("/usr/share/games/fortunes") ? "/usr/share/games/fortunes" : "";
}

BertPrepareOptions fortunes_options(const std::string& out) {
  BertPrepareOptions o;
  o.inputs = {fortunes_dir()};
  o.excludes = {"*.dat", "*.u8"};
  o.doc_delimiter = "%";
  o.out_dir = out;
  o.name = "fortunes";
  o.val_fraction = 0.05;
  o.vocab_size = 4096;
  o.dupe_factor = 2;
  o.progress = ProgressMode::kNone;
  return o;
}

// The whole preparation on the default corpus: files, NSP balance within sampling error,
// the original rule's imbalance on these short documents, determinism, and the loader
// reading the result.
TEST(BertPrepare, DefaultCorpus) {
  if (fortunes_dir().empty()) GTEST_SKIP() << "the fortunes package is not installed";
  TempDir dir;
  const BertPrepareOptions o = fortunes_options(dir.path());
  const BertPrepareSummary s = prepare_bert(o);
  EXPECT_EQ(s.documents, 15217u);
  EXPECT_TRUE(s.vocab_trained);
  EXPECT_EQ(s.vocab_size, 4096);
  EXPECT_GT(s.train_instances, 15000u);
  EXPECT_GT(s.val_instances, 300u);
  // Balanced: each label is a fair coin, so NotNext ~ Binomial(n, 0.5); 5 sigma.
  const double n = double(s.train_instances), sd = std::sqrt(0.25 / n);
  EXPECT_NEAR(double(s.train_not_next) / n, 0.5, 5 * sd) << describe(s);
  const double nv = double(s.val_instances);
  EXPECT_NEAR(double(s.val_not_next) / nv, 0.5, 5 * std::sqrt(0.25 / nv));

  BertInstanceFile train(s.train_path), val(s.val_path);
  EXPECT_EQ(train.size(), s.train_instances);
  EXPECT_EQ(train.max_seq_len(), 128);
  EXPECT_EQ(train.vocab().to_text(), WordpieceVocab::load(s.vocab_path).to_text());
  EXPECT_EQ(train.header().dupe_factor, 2u);
  BertLoader loader(s.train_path, 32, 128, 4096);
  BertBatch batch;
  int64_t nsp_ones = 0;
  for (int i = 0; i < 50; ++i) {
    loader.next(batch);
    for (int b = 0; b < 32; ++b) nsp_ones += batch.nsp_labels[b];
    EXPECT_GT(batch.num_masked, 32);
  }
  EXPECT_NEAR(nsp_ones / 1600.0, 0.5, 5 * std::sqrt(0.25 / 1600));

  // Same options, same bytes.
  TempDir again;
  const BertPrepareSummary s2 = prepare_bert(fortunes_options(again.path()));
  EXPECT_EQ(data_test::run("cmp " + s.train_path + " " + s2.train_path).status, 0);
  EXPECT_EQ(data_test::run("cmp " + s.val_path + " " + s2.val_path).status, 0);

  // The original rule: on fortunes (a third are one sentence) most labels are NotNext.
  BertPrepareOptions g = fortunes_options(dir.path());
  g.nsp = NspRule::kGoogle;
  g.name = "google";
  g.vocab_path = s.vocab_path;
  const BertPrepareSummary sg = prepare_bert(g);
  EXPECT_FALSE(sg.vocab_trained);
  EXPECT_GT(double(sg.train_not_next) / double(sg.train_instances), 0.6) << describe(sg);
}

TEST(BertPrepareCli, RunsAndGivesClearErrors) {
  TempDir dir;
  std::string corpus;
  for (int d = 0; d < 40; ++d) {
    corpus += "Document number " + std::to_string(d) + " starts here. It has a second sentence. ";
    corpus += "And a third one about cats and dogs.\n%\n";
  }
  data_test::write_bytes(dir / "c.txt", corpus);
  auto r = testing::run_mptrain("prepare --task bert " + dir / "c.txt" + " --doc-delimiter % -o " +
                                dir / "out" + " --vocab-size 200 --max-seq-len 32 --val-fraction 0.1 -q");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("train:"), std::string::npos) << r.output;
  const std::string train = dir / "out/out_train.bert";
  ASSERT_TRUE(std::filesystem::exists(train)) << r.output;
  ASSERT_TRUE(std::filesystem::exists(dir / "out/out_vocab.txt"));

  // The instances as text, masked.
  r = testing::run_mptrain("tokenizer show-instances " + train + " -n 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[CLS]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("max_seq_len 32"), std::string::npos) << r.output;

  // A vocabulary without the special tokens.
  data_test::write_bytes(dir / "bad_vocab.txt", "[PAD]\n[UNK]\nthe\n");
  testing::expect_clear_error(testing::run_mptrain("prepare --task bert " + dir / "c.txt" + " -o " +
                                                   dir / "o2" + " --vocab " + dir / "bad_vocab.txt"),
                              "lacks the special token(s) [CLS] [SEP] [MASK]");
  testing::expect_clear_error(
      testing::run_mptrain("tokenizer encode --vocab " + dir / "bad_vocab.txt" + " --text hi"), "[MASK]");
  // A BERT option without --task bert.
  testing::expect_clear_error(
      testing::run_mptrain("prepare " + dir / "c.txt" + " -o " + dir / "o3" + " --max-seq-len 64"),
      "--max-seq-len is an option of --task bert");

  // Another format version, a truncated file.
  std::ifstream in(train, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  std::string v9 = bytes;
  const uint32_t nine = 9;
  std::memcpy(&v9[8], &nine, 4);
  data_test::write_bytes(dir / "v9.bert", v9);
  testing::expect_clear_error(testing::run_mptrain("tokenizer show-instances " + dir / "v9.bert"),
                              "has format version 9, expected 1");
  data_test::write_bytes(dir / "cut.bert", bytes.substr(0, bytes.size() / 2));
  testing::expect_clear_error(testing::run_mptrain("tokenizer show-instances " + dir / "cut.bert"),
                              "is truncated");
  // Longer sequences than the model takes.
  testing::expect_clear_error(testing::run_mptrain("tokenizer show-instances " + train + " --seq 16"),
                              "has max_seq_len 32, more than the model's 16 positions");
}

}  // namespace
}  // namespace mptrain
