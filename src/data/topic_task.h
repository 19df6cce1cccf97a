// A text-classification task made from a collection whose files are its categories (Debian's
// fortune files: computers, definitions, people, ...): `mptrain prepare --task topics`.
//
// Each input file is one label (its file name); its documents (split by the delimiter, as the
// other prepare tasks do) are that label's examples, in their normal form (whitespace runs made
// one space, trimmed: GLUE's one-line sentences). The split is by the normal form's hash
// (XXH3-64): test when hash % 100 < test_percent, validation below test + validation percent,
// else train, so a text is in one split whatever the order of the files and identical texts
// never straddle two splits. Inside the task, a text listed under one label more than once is
// kept once; a text listed under two labels is dropped (no right answer). Labels with fewer
// than min_per_label examples left are dropped; the rest are numbered in name order.
//
// Written to out_dir: train.tsv, validation.tsv, test.tsv (GLUE's SST-2 layout: a header
// "sentence\tlabel", then one example per line, the label its number), labels.txt (the names,
// one per line, by number) and heldout.txt (the hashes of every validation and test text, 16 hex
// digits per line): `prepare --exclude-docs heldout.txt` leaves them out of a pretraining
// corpus, so pretraining never sees the texts the task is scored on. docs/DATA.md has the details.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

namespace mptrain {

struct TopicTaskOptions {
  std::vector<std::string> inputs, excludes;  // as prepare's (data/prepare.h)
  std::string doc_delimiter = "%";
  std::string out_dir;
  int min_per_label = 200;
  int validation_percent = 10, test_percent = 10;
};

struct TopicTaskSummary {
  size_t files = 0, documents = 0;
  size_t repeated = 0;   // copies of a text under its own label, dropped (one kept)
  size_t ambiguous = 0;  // examples whose text is under two labels, dropped
  std::vector<std::pair<std::string, size_t>> labels;          // kept, by number: name and examples
  std::vector<std::pair<std::string, size_t>> dropped_labels;  // under min_per_label
  size_t train = 0, validation = 0, test = 0;
};

TopicTaskSummary prepare_topic_task(const TopicTaskOptions& opt);
std::string describe(const TopicTaskSummary& s);

// A document's normal form (whitespace runs one space, no leading or trailing space) and the
// hash the task's split and held-out list use.
std::string normal_text(std::string_view doc);
std::uint64_t text_hash(std::string_view normal);

// The held-out hashes of a heldout.txt (Error naming the file and line on anything but 16 hex
// digits per line).
std::unordered_set<std::uint64_t> read_heldout(const std::string& path);
// Whether a document of a pretraining corpus is held out (its normal form's hash is listed).
inline bool held_out(const std::unordered_set<std::uint64_t>& heldout, std::string_view doc) {
  return !heldout.empty() && heldout.count(text_hash(normal_text(doc))) > 0;
}

}  // namespace mptrain
