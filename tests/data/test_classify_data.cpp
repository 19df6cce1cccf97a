// Classification examples from GLUE-style files (data/classify_data.h): SST-2's single sentences
// and QNLI's pairs with their header rows, JSON lines, [CLS] a [SEP] b [SEP] with segment ids,
// Hugging Face's longest_first truncation, and each kind of bad input as one clear error.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/test_util.h"
#include "data/classify_data.h"
#include "data/data_test_util.h"
#include "data/wordpiece.h"

namespace mptrain {
namespace {

using data_test::TempDir;

WordpieceTokenizer tokenizer() {
  std::vector<std::string> t = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a",   "good", "bad", "film",
                                "is",    "it",    "what",  "?",     "yes",   "no",    "the", "plot", "."};
  return WordpieceTokenizer(WordpieceVocab::from_tokens(t, "test"));
}

TEST(ClassifyData, Sst2SingleSentencesWithTheirHeader) {
  const TempDir d;
  data_test::write_bytes(d / "train.tsv", "sentence\tlabel\na good film\t1\na bad film .\t0\n");
  const WordpieceTokenizer tok = tokenizer();
  const std::vector<ClassifyExample> ex = read_classify_file(d / "train.tsv", tok, {});
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_EQ(ex[0].ids, (std::vector<int>{2, 5, 6, 8, 3}));  // [CLS] a good film [SEP]
  EXPECT_EQ(ex[0].types, (std::vector<int>(5, 0)));
  EXPECT_EQ(ex[0].label, 1);
  EXPECT_EQ(ex[1].label, 0);
}

TEST(ClassifyData, QnliPairsWithNamedLabelsAndJsonLines) {
  const TempDir d;
  // QNLI's layout: index, question, sentence, label names.
  data_test::write_bytes(d / "dev.tsv",
                         "index\tquestion\tsentence\tlabel\n0\twhat is it ?\tthe plot is good .\tentailment\n"
                         "1\tis it bad ?\tno\tnot_entailment\n");
  ClassifyReadOptions o;
  o.columns = {"question", "sentence", "label"};
  o.label_names = {"entailment", "not_entailment"};
  const WordpieceTokenizer tok = tokenizer();
  const std::vector<ClassifyExample> ex = read_classify_file(d / "dev.tsv", tok, o);
  ASSERT_EQ(ex.size(), 2u);
  // [CLS] what is it ? [SEP] the plot is good . [SEP]
  EXPECT_EQ(ex[0].ids, (std::vector<int>{2, 11, 9, 10, 12, 3, 15, 16, 9, 6, 17, 3}));
  EXPECT_EQ(ex[0].types, (std::vector<int>{0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(ex[0].label, 0);
  EXPECT_EQ(ex[1].label, 1);
  // The same pairs as JSON lines, labels as numbers.
  data_test::write_bytes(d / "dev.jsonl",
                         "{\"question\": \"what is it ?\", \"sentence\": \"the plot is good .\", \"label\": 0}\n"
                         "{\"question\": \"is it bad ?\", \"sentence\": \"no\", \"label\": 1}\n");
  const std::vector<ClassifyExample> js = read_classify_file(d / "dev.jsonl", tok, o);
  ASSERT_EQ(js.size(), 2u);
  EXPECT_EQ(js[0].ids, ex[0].ids);
  EXPECT_EQ(js[1].label, 1);
}

// Hugging Face's longest_first: the longer side loses its last token; b on a tie.
TEST(ClassifyData, LongestFirstTruncation) {
  std::vector<int> a = {1, 2, 3, 4, 5, 6}, b = {7, 8};
  truncate_longest_first(a, b, 6);
  EXPECT_EQ(a, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(b, (std::vector<int>{7, 8}));
  a = {1, 2, 3}, b = {4, 5, 6};
  truncate_longest_first(a, b, 3);
  EXPECT_EQ(a, (std::vector<int>{1, 2}));
  EXPECT_EQ(b, (std::vector<int>{4}));
  const TempDir d;
  data_test::write_bytes(d / "long.tsv", "sentence\tlabel\na good film is a good film\t1\n");
  ClassifyReadOptions o;
  o.max_seq_len = 5;
  const WordpieceTokenizer tok = tokenizer();
  EXPECT_EQ(read_classify_file(d / "long.tsv", tok, o)[0].ids, (std::vector<int>{2, 5, 6, 8, 3}));
}

TEST(ClassifyData, BadInputIsOneClearError) {
  const TempDir d;
  const WordpieceTokenizer tok = tokenizer();
  data_test::write_bytes(d / "label.tsv", "sentence\tlabel\na good film\t1\na bad film\t2\n");
  testing::expect_error([&] { read_classify_file(d / "label.tsv", tok, {}); },
                        "label.tsv, line 3: label 2 is outside [0, 2)");
  data_test::write_bytes(d / "names.tsv", "sentence\tlabel\na good film\tpositive\n");
  testing::expect_error([&] { read_classify_file(d / "names.tsv", tok, {}); },
                        "line 2: label 'positive' is neither a number nor one of the 0 label names");
  data_test::write_bytes(d / "column.tsv", "text\tlabel\na good film\t1\n");
  testing::expect_error([&] { read_classify_file(d / "column.tsv", tok, {}); }, "line 2: no column 'sentence'");
  data_test::write_bytes(d / "empty.tsv", "");
  testing::expect_error([&] { read_classify_file(d / "empty.tsv", tok, {}); }, "empty.tsv: no examples");
  data_test::write_bytes(d / "header_only.tsv", "sentence\tlabel\n");
  testing::expect_error([&] { read_classify_file(d / "header_only.tsv", tok, {}); }, "no examples");
  data_test::write_bytes(d / "pair.tsv", "index\tquestion\tsentence\tlabel\n0\twhat is it ?\tthe plot\t1\n");
  testing::expect_error([&] { read_classify_file(d / "pair.tsv", tok, {}); },
                        "two text columns (question, sentence) for a single-sentence task");
  data_test::write_bytes(d / "fields.tsv", "sentence\tlabel\na good film\n");
  testing::expect_error([&] { read_classify_file(d / "fields.tsv", tok, {}); }, "line 2: 1 fields, the header names 2");
  data_test::write_bytes(d / "bad.jsonl", "{\"sentence\": \"a\", \"label\": 0}\nnot json\n");
  testing::expect_error([&] { read_classify_file(d / "bad.jsonl", tok, {}); }, "bad.jsonl, line 2: not a JSON object");
  testing::expect_error([&] { read_classify_file(d / "missing.tsv", tok, {}); }, "missing.tsv");
}

}  // namespace
}  // namespace mptrain
