// The topic-classification task of a categorised collection (data/topic_task.h).
#include "data/topic_task.h"

#include <xxhash.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/error.h"
#include "data/classify_data.h"
#include "data/prepare.h"
#include "io/fileutil.h"

namespace fs = std::filesystem;

namespace mptrain {

std::string normal_text(std::string_view doc) {
  std::string out;
  out.reserve(doc.size());
  bool space = false;
  for (const char c : doc) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

std::uint64_t text_hash(std::string_view normal) { return XXH3_64bits(normal.data(), normal.size()); }

std::unordered_set<std::uint64_t> read_heldout(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot read the held-out list '" + path + "'");
  std::unordered_set<std::uint64_t> hashes;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const bool hex = line.size() == 16 && std::all_of(line.begin(), line.end(), [](char c) {
                       return std::isxdigit(static_cast<unsigned char>(c));
                     });
    MPT_CHECK(hex, "the held-out list '" + path + "', line " + std::to_string(n) +
                       ": expected 16 hex digits (a hash prepare --task topics wrote)");
    hashes.insert(std::stoull(line, nullptr, 16));
  }
  return hashes;
}

namespace {

enum Split { kTrain, kValidation, kTest };

Split split_of(std::uint64_t hash, const TopicTaskOptions& opt) {
  const auto bucket = static_cast<int>(hash % 100);
  if (bucket < opt.test_percent) return kTest;
  if (bucket < opt.test_percent + opt.validation_percent) return kValidation;
  return kTrain;
}

}  // namespace

TopicTaskSummary prepare_topic_task(const TopicTaskOptions& opt) {
  MPT_CHECK(!opt.out_dir.empty(), "prepare --task topics: no output folder given");
  MPT_CHECK(opt.min_per_label >= 1, "prepare --task topics: --min-per-label must be at least 1");
  MPT_CHECK(
      opt.validation_percent >= 1 && opt.test_percent >= 1 && opt.validation_percent + opt.test_percent < 100,
      "prepare --task topics: the validation and test shares must be at least 1% each and leave some "
      "training");
  TopicTaskSummary sum;
  const std::vector<TextFile> files = expand_inputs(opt.inputs, opt.excludes);
  sum.files = files.size();
  // Each text once: hash → the labels it came under (several: ambiguous) and its first form.
  std::vector<std::string> names;
  std::map<std::string, int> label_of_name;
  std::map<std::uint64_t, std::pair<std::string, std::vector<int>>> texts;
  for (const TextFile& f : files) {
    const std::string name = fs::path(f.path).filename().string();
    const auto [it, fresh] = label_of_name.emplace(name, static_cast<int>(names.size()));
    if (fresh) names.push_back(name);
    const std::string content = read_text_file(f.path);
    for (std::string_view d : split_documents(content, opt.doc_delimiter)) {
      std::string text = normal_text(d);
      if (text.empty()) continue;
      ++sum.documents;
      auto& [first, labels] = texts[text_hash(text)];
      if (first.empty()) first = std::move(text);
      if (std::find(labels.begin(), labels.end(), it->second) != labels.end())
        ++sum.repeated;
      else
        labels.push_back(it->second);
    }
  }
  if (sum.documents == 0) throw Error("prepare --task topics: the inputs hold no documents");
  // Unambiguous texts, counted per label; labels under the minimum dropped, the rest numbered
  // in name order.
  std::vector<size_t> count(names.size(), 0);
  for (const auto& [hash, entry] : texts) {
    if (entry.second.size() > 1)
      sum.ambiguous += entry.second.size();
    else
      ++count[static_cast<size_t>(entry.second[0])];
  }
  std::vector<int> order(names.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return names[a] < names[b]; });
  std::vector<int> number(names.size(), -1);
  for (const int l : order) {
    const auto n = static_cast<size_t>(l);
    if (count[n] >= static_cast<size_t>(opt.min_per_label)) {
      number[n] = static_cast<int>(sum.labels.size());
      sum.labels.emplace_back(names[n], count[n]);
    } else {
      sum.dropped_labels.emplace_back(names[n], count[n]);
    }
  }
  MPT_CHECK(sum.labels.size() >= 2, "prepare --task topics: " + std::to_string(sum.labels.size()) +
                                        " label(s) have at least " + std::to_string(opt.min_per_label) +
                                        " examples; a task needs two (lower --min-per-label)");
  // The three splits (in hash order: a fixed shuffle) and the held-out list.
  std::string tsv[3] = {"sentence\tlabel\n", "sentence\tlabel\n", "sentence\tlabel\n"}, heldout;
  for (const auto& [hash, entry] : texts) {
    if (entry.second.size() > 1 || number[static_cast<size_t>(entry.second[0])] < 0) continue;
    const Split s = split_of(hash, opt);
    tsv[s] += entry.first + "\t" + std::to_string(number[static_cast<size_t>(entry.second[0])]) + "\n";
    (s == kTrain ? sum.train : s == kValidation ? sum.validation : sum.test) += 1;
    if (s != kTrain) {
      char line[20];
      std::snprintf(line, sizeof line, "%016llx\n", static_cast<unsigned long long>(hash));
      heldout += line;
    }
  }
  std::vector<std::string> label_names;
  for (const auto& [name, n] : sum.labels) label_names.push_back(name);
  std::error_code ec;
  fs::create_directories(opt.out_dir, ec);
  if (ec) throw Error("cannot create output folder '" + opt.out_dir + "': " + ec.message());
  const fs::path out(opt.out_dir);  // each file complete or absent (write_file_atomic)
  write_file_atomic((out / "train.tsv").string(), tsv[kTrain]);
  write_file_atomic((out / "validation.tsv").string(), tsv[kValidation]);
  write_file_atomic((out / "test.tsv").string(), tsv[kTest]);
  write_file_atomic((out / "labels.txt").string(), labels_text(label_names));
  write_file_atomic((out / "heldout.txt").string(), heldout);
  return sum;
}

std::string describe(const TopicTaskSummary& s) {
  std::string out = "topics: " + std::to_string(s.documents) + " documents from " + std::to_string(s.files) +
                    " files; " + std::to_string(s.repeated) + " repeats and " + std::to_string(s.ambiguous) +
                    " examples under two labels dropped\n";
  out += "  " + std::to_string(s.labels.size()) + " labels:";
  for (const auto& [name, n] : s.labels) out += " " + name + " (" + std::to_string(n) + ")";
  out += "\n";
  if (!s.dropped_labels.empty()) {
    out += "  dropped, too few examples:";
    for (const auto& [name, n] : s.dropped_labels) out += " " + name + " (" + std::to_string(n) + ")";
    out += "\n";
  }
  out += "  train " + std::to_string(s.train) + ", validation " + std::to_string(s.validation) + ", test " +
         std::to_string(s.test) + " examples; heldout.txt lists the validation and test texts\n";
  return out;
}

}  // namespace mptrain
