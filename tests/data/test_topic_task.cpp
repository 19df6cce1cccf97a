// The topic-classification task (data/topic_task.h, `mptrain prepare --task topics`): labels from
// file names, splits by hash with no text in two of them, repeats kept once, texts under two
// labels dropped, small labels dropped; the held-out list keeps validation and test texts out of
// a pretraining corpus; and, on the real fortune files, the baselines' script
// (bench/topic_baselines.py) scores TF-IDF + logistic regression far above the majority class.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "core/error.h"
#include "data/bert_prepare.h"
#include "data/data_test_util.h"
#include "data/topic_task.h"

namespace mptrain {
namespace {

using data_test::TempDir;

// The examples of one split: text → label.
std::map<std::string, int> read_tsv(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "sentence\tlabel") << path;
  std::map<std::string, int> out;
  while (std::getline(in, line)) {
    const size_t tab = line.rfind('\t');
    EXPECT_NE(tab, std::string::npos) << line;
    EXPECT_EQ(line.find('\t'), tab) << "one tab per line: " << line;
    out[line.substr(0, tab)] = std::stoi(line.substr(tab + 1));
  }
  return out;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Three categories of fortune-style files: "alpha" and "beta" with 40 distinct texts each, a
// repeated text, a text in both, and "gamma" with only 3 (under the minimum).
struct Collection {
  TempDir dir;
  Collection() {
    data_test::write_bytes(dir / "alpha", body("alpha", 40) + "the same joke\n%\nthe same joke\n%\nshared\ttext\n");
    data_test::write_bytes(dir / "beta", body("beta", 40) + "shared text\n");
    data_test::write_bytes(dir / "gamma", body("gamma", 3));
  }
  static std::string body(const std::string& label, int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += label + " saying number " + std::to_string(i) + "\n  on two lines\n%\n";
    return s;
  }
  TopicTaskOptions options(const std::string& out) const {
    TopicTaskOptions o;
    o.inputs = {dir.path()};
    o.out_dir = out;
    o.min_per_label = 10;
    return o;
  }
};

TEST(TopicTask, LabelsSplitsRepeatsAndAmbiguousTexts) {
  const Collection c;
  const TempDir out;
  const TopicTaskSummary s = prepare_topic_task(c.options(out.path()));
  EXPECT_EQ(s.files, 3u);
  EXPECT_EQ(s.repeated, 1u);   // "the same joke" twice under alpha
  EXPECT_EQ(s.ambiguous, 2u);  // "shared text" under alpha and beta (whitespace normalised alike)
  ASSERT_EQ(s.labels.size(), 2u);
  EXPECT_EQ(s.labels[0], (std::pair<std::string, size_t>{"alpha", 41}));
  EXPECT_EQ(s.labels[1], (std::pair<std::string, size_t>{"beta", 40}));
  ASSERT_EQ(s.dropped_labels.size(), 1u);
  EXPECT_EQ(s.dropped_labels[0].first, "gamma");
  EXPECT_EQ(read_all(out / "labels.txt"), "alpha\nbeta\n");

  const std::map<std::string, int> train = read_tsv(out / "train.tsv"), val = read_tsv(out / "validation.tsv"),
                                   test = read_tsv(out / "test.tsv");
  EXPECT_EQ(train.size() + val.size() + test.size(), 81u);
  EXPECT_EQ(train.size(), s.train);
  EXPECT_GT(train.size(), 50u);  // ~80% of 81
  std::set<std::string> seen;
  for (const auto* split : {&train, &val, &test})
    for (const auto& [text, label] : *split) {
      EXPECT_TRUE(seen.insert(text).second) << "in two splits: " << text;
      EXPECT_EQ(text.find('\n'), std::string::npos);
      EXPECT_EQ(label, text.rfind("alpha", 0) == 0 || text == "the same joke" ? 0 : 1) << text;
    }
  EXPECT_TRUE(train.count("alpha saying number 0 on two lines") + val.count("alpha saying number 0 on two lines") +
                  test.count("alpha saying number 0 on two lines") ==
              1);
  EXPECT_EQ(seen.count("shared text"), 0u);
  // heldout.txt: exactly the validation and test texts' hashes.
  const std::unordered_set<std::uint64_t> held = read_heldout(out / "heldout.txt");
  EXPECT_EQ(held.size(), val.size() + test.size());
  for (const auto* split : {&val, &test})
    for (const auto& [text, label] : *split) EXPECT_TRUE(held.count(text_hash(text))) << text;
  for (const auto& [text, label] : train) EXPECT_FALSE(held.count(text_hash(text))) << text;

  // The same task from the files in another order, and again: byte for byte the same.
  TopicTaskOptions reversed = c.options(out / "again");
  reversed.inputs = {c.dir / "gamma", c.dir / "beta", c.dir / "alpha"};
  prepare_topic_task(reversed);
  for (const char* f : {"train.tsv", "validation.tsv", "test.tsv", "labels.txt", "heldout.txt"})
    EXPECT_EQ(read_all(out / f), read_all(out / "again/" + std::string(f))) << f;
}

TEST(TopicTask, HeldOutTextsStayOutOfAPretrainingCorpus) {
  const TempDir out;
  TopicTaskOptions t;
  t.inputs = {testing::fortunes_dir()};
  t.excludes = {"*.dat", "*.u8"};
  t.out_dir = out / "task";
  const TopicTaskSummary s = prepare_topic_task(t);
  BertPrepareOptions b;
  b.inputs = t.inputs;
  b.excludes = t.excludes;
  b.doc_delimiter = "%";
  b.out_dir = out / "bert";
  b.vocab_size = 1000;
  b.dupe_factor = 1;
  b.progress = ProgressMode::kNone;
  const BertPrepareSummary all = prepare_bert(b);
  b.exclude_docs = out / "task/heldout.txt";
  const BertPrepareSummary kept = prepare_bert(b);
  // Every copy of a held-out text (a text may stand in the corpus more than once).
  EXPECT_GE(kept.excluded, s.validation + s.test);
  EXPECT_LT(kept.excluded, s.validation + s.test + 20);
  EXPECT_EQ(kept.documents + kept.excluded, all.documents);
  EXPECT_EQ(all.excluded, 0u);
  // The GPT-2 token shards leave out the same documents (the command line, as a user runs it).
  const testing::RunResult g = testing::run_mptrain(
      "prepare " + testing::fortunes_dir() + " --exclude '*.dat' --exclude '*.u8' --doc-delimiter % --val-fraction 0.01 -q -o " +
      (out / "gpt2") + " --exclude-docs " + (out / "task/heldout.txt"));
  ASSERT_EQ(g.exit_code, 0) << g.output;
  const auto commas = [](size_t n) {  // as the summary prints counts: 12,564
    std::string d = std::to_string(n);
    for (int i = static_cast<int>(d.size()) - 3; i > 0; i -= 3) d.insert(static_cast<size_t>(i), ",");
    return d;
  };
  EXPECT_NE(g.output.find(commas(kept.excluded) + " documents held out (--exclude-docs)"), std::string::npos)
      << g.output;
  EXPECT_NE(g.output.find("prepared " + commas(kept.documents) + " documents"), std::string::npos) << g.output;
}

TEST(TopicTask, BadInputIsOneClearError) {
  const Collection c;
  const TempDir out;
  TopicTaskOptions o = c.options(out.path());
  o.min_per_label = 41;  // only alpha is left
  testing::expect_error([&] { prepare_topic_task(o); }, "a task needs two (lower --min-per-label)");
  data_test::write_bytes(out / "bad.txt", "0123456789abcdef\nnot a hash\n");
  testing::expect_error([&] { read_heldout(out / "bad.txt"); }, "line 2: expected 16 hex digits");
  data_test::write_bytes(out / "empty", "");
  o.inputs = {out / "empty"};
  testing::expect_error([&] { prepare_topic_task(o); }, "the inputs hold no documents");
  const testing::RunResult r =
      testing::run_mptrain("prepare --task topics " + c.dir.path() + " -o " + (out / "t") + " --exclude-docs " +
                           (out / "bad.txt"));
  testing::expect_clear_error(r, "--exclude-docs is for the pretraining tasks");
}

// The real task and its baselines: 24 fortune files with at least 200 texts, and TF-IDF + logistic
// regression well above the majority class on validation and test (the script's own run).
TEST(TopicTask, FortuneTopicsAndTheirBaselines) {
  const TempDir out;
  const testing::RunResult p = testing::run_mptrain("prepare --task topics " + testing::fortunes_dir() +
                                                    " --exclude '*.dat' --exclude '*.u8' -o " + out.path());
  ASSERT_EQ(p.exit_code, 0) << p.output;
  EXPECT_NE(p.output.find("24 labels"), std::string::npos) << p.output;
  const testing::RunResult r = testing::run_command("OPENBLAS_NUM_THREADS=1 /usr/bin/python3 " +
                                                    testing::source_dir() + "/bench/topic_baselines.py --json " +
                                                    out.path());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream lines(r.output);
  std::string majority, tfidf;
  std::getline(lines, majority);
  std::getline(lines, tfidf);
  const auto field = [](const std::string& json, const std::string& split) {
    const size_t at = json.find("\"" + split + "\": {\"accuracy\": ");
    EXPECT_NE(at, std::string::npos) << json;
    return std::stod(json.substr(at + split.size() + 17));
  };
  for (const char* split : {"validation", "test"}) {
    EXPECT_LT(field(majority, split), 0.15) << majority;
    EXPECT_GT(field(tfidf, split), 0.40) << tfidf;
  }
}

}  // namespace
}  // namespace mptrain
