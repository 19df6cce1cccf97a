// Labelled examples for sequence classification (BertForSequenceClassification's input): single
// sentences ("text, label": SST-2's form) or pairs ("text_a, text_b, label": MRPC's and QNLI's),
// read from a GLUE-style TSV or a JSONL file, tokenised with WordPiece into
// [CLS] a [SEP] (b [SEP]), segment ids 0 then 1, and truncated to max_seq_len with Hugging Face's
// `longest_first` (one token at a time from the longer of a and b).
//
// Columns are named by the header (TSV) or the keys (JSONL); a TSV without a header names them by
// 0-based index ("0", "1", ...). Labels are integers in [0, num_labels), or names looked up in
// label_names (GLUE's "entailment"/"not_entailment"). Bad input is one Error naming the file and
// line: a missing column, a label outside num_labels or not among the names, an empty file, a
// line with the wrong number of fields, or a file with two text columns given to a
// single-sentence task (a pair file: name its second column with text_b).
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace mptrain {

class WordpieceTokenizer;

struct ClassifyColumns {
  std::string text = "sentence";
  std::string text_b;           // empty: single sentences
  std::string label = "label";  // empty: unlabelled examples (label -1), for predictions
};

struct ClassifyReadOptions {
  ClassifyColumns columns;
  bool header = true;  // TSV: the first line names the columns
  int num_labels = 2;
  std::vector<std::string> label_names;  // empty: integer labels only
  int max_seq_len = 128;                 // [CLS] and [SEP]s included
};

struct ClassifyExample {
  std::vector<int> ids, types;  // [CLS] a [SEP] (b [SEP]); 0 over a, 1 over b
  int label = 0;                // -1: unlabelled
};

// A task's labels.txt: one label name a line, by class id.
std::string labels_text(const std::vector<std::string>& labels);
// One name a line (a trailing \r and blank lines dropped); Error for none or one named twice.
std::vector<std::string> parse_labels_text(const std::string& text, const std::string& what);

// The examples of one file (.jsonl: JSON lines; anything else: tab-separated).
std::vector<ClassifyExample> read_classify_file(const std::string& path, const WordpieceTokenizer& tok,
                                                const ClassifyReadOptions& opt);
// The same from a file's text; `path` names it in errors.
std::vector<ClassifyExample> parse_classify_text(std::string_view text, bool jsonl, const std::string& path,
                                                 const WordpieceTokenizer& tok,
                                                 const ClassifyReadOptions& opt);

// Hugging Face's longest_first: drops the last token of the longer of a and b (b on a tie) until
// a.size() + b.size() <= max_tokens.
void truncate_longest_first(std::vector<int>& a, std::vector<int>& b, size_t max_tokens);

}  // namespace mptrain
