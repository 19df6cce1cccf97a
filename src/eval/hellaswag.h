// HellaSwag's jsonl format, the input of multiple-choice evaluation (eval/eval.h). Kept
// apart from the evaluation so that the parser links on its own (fuzz/hellaswag_fuzz.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mptrain {

struct McExample {
  int64_t line = 0;  // 1-based line of the jsonl file
  std::string context;
  std::vector<std::string> endings;
  int label = 0;
};

// The examples of a HellaSwag-format jsonl file: one JSON object per non-blank line with "ctx"
// (or "ctx_a" and "ctx_b", joined by a space when ctx_b is not empty), "endings" (4 strings) and
// "label" (an integer 0..3, or such an integer as a string); other fields are ignored.
// The first malformed line throws one Error "'<path>' line N: <what is wrong>".
std::vector<McExample> read_hellaswag(const std::string& path);
// The same on the file's contents (`path` only names it in errors).
std::vector<McExample> parse_hellaswag(std::string_view text, const std::string& path);

}  // namespace mptrain
