// tokenizer.json ⇄ GPT-2's vocabulary files (data/hf_tokenizer_json.h).
#include "data/hf_tokenizer_json.h"

#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"

namespace mptrain {

namespace {

constexpr const char* kEot = "<|endoftext|>";

// A field that must be absent, null, false or "" (a BPE or ByteLevel option GPT-2 does not use).
bool unset(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() || (it->is_boolean() && !it->get<bool>()) ||
         (it->is_string() && it->get<std::string>().empty());
}

// A field that is present and true (a tokenizer.json flag whose absence means false).
bool is_true(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

std::string type_of(const nlohmann::json& j) {
  return j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>() : "?";
}

// A Split step's regex, written for the Oniguruma engine Hugging Face's tokenizers uses, in PCRE2's
// syntax. The two agree on what these patterns use ((?i:...), \p{L}, \p{N}, {1,3}, lookahead) but
// for \s: Oniguruma's is Unicode's White_Space set, PCRE2's (under UCP) also takes U+180E, so \s
// and \S become \p{White_Space} and \P{White_Space}, which also work inside a class. Oniguruma's
// \h is a hex digit and PCRE2's a horizontal space, so \h and \H are refused.
std::string pcre2_pattern_of(const std::string& regex, const std::string& what) {
  std::string out;
  out.reserve(regex.size() + 32);
  for (size_t i = 0; i < regex.size(); ++i) {
    if (regex[i] != '\\' || i + 1 == regex.size()) {
      out += regex[i];
      continue;
    }
    const char c = regex[++i];
    MPT_CHECK(c != 'h' && c != 'H', what + ": the Split regex uses \\" + std::string(1, c) +
                                        ", whose meaning differs between Oniguruma and PCRE2");
    if (c == 's')
      out += "\\p{White_Space}";
    else if (c == 'S')
      out += "\\P{White_Space}";
    else
      out += {'\\', c};
  }
  return out;
}

// One Split step: a regex whose matches and the text between them become pieces.
std::string split_pattern_of(const nlohmann::json& step, const std::string& what) {
  const auto pattern = step.find("pattern");
  MPT_CHECK(pattern != step.end() && pattern->is_object() && pattern->contains("Regex") &&
                (*pattern)["Regex"].is_string(),
            what + ": a Split pre_tokenizer is supported with a {\"Regex\": ...} pattern only");
  const auto b = step.find("behavior");
  const std::string behavior = b != step.end() && b->is_string() ? b->get<std::string>() : "(none)";
  MPT_CHECK(behavior == "Isolated",
            what + ": a Split pre_tokenizer's behavior " + behavior + " is not supported (only Isolated)");
  MPT_CHECK(unset(step, "invert"), what + ": a Split pre_tokenizer with invert is not supported");
  std::string pcre2 = pcre2_pattern_of((*pattern)["Regex"].get<std::string>(), what);
  try {
    Gpt2Pretokenizer check({pcre2});
  } catch (const Error& e) {
    throw Error(what + ": the Split regex does not compile: " + e.what());
  }
  return pcre2;
}

// The pre-tokenizer's steps as split patterns (pretokenize.h), in order: Split, Digits, and last
// ByteLevel (no prefix space; its own regex, GPT-2's, unless use_regex is false), alone or in a
// Sequence. ByteLevel's byte-to-unicode mapping is what the BPE below expects, so it must be there.
std::vector<std::string> split_patterns_of(const nlohmann::json& pre, const std::string& what) {
  MPT_CHECK(!pre.is_null(), what + ": no pre_tokenizer; byte-level BPE needs the ByteLevel one");
  const bool sequence = type_of(pre) == "Sequence";
  const auto list = sequence ? pre.find("pretokenizers") : pre.end();
  MPT_CHECK(!sequence || (list != pre.end() && list->is_array() && !list->empty()),
            what + ": a pre_tokenizer Sequence without steps");
  const std::vector<nlohmann::json> steps =
      sequence ? list->get<std::vector<nlohmann::json>>() : std::vector<nlohmann::json>{pre};
  std::vector<std::string> patterns;
  for (size_t i = 0; i < steps.size(); ++i) {
    const nlohmann::json& step = steps[i];
    const std::string type = type_of(step);
    const bool last = i + 1 == steps.size();
    MPT_CHECK(type != "Metaspace", what +
                                       ": the Metaspace pre_tokenizer is SentencePiece's, which is not "
                                       "supported (only byte-level BPE)");
    if (type == "Split") {
      patterns.push_back(split_pattern_of(step, what));
    } else if (type == "Digits") {
      patterns.push_back(is_true(step, "individual_digits") ? kDigitsPattern : kDigitRunsPattern);
    } else if (type == "ByteLevel") {
      MPT_CHECK(last, what + ": a pre_tokenizer step after ByteLevel is not supported");
      MPT_CHECK(unset(step, "add_prefix_space"), what + ": ByteLevel with add_prefix_space is not supported");
      const bool regex = !step.contains("use_regex") || step["use_regex"].is_null() ||
                         (step["use_regex"].is_boolean() && step["use_regex"].get<bool>());
      if (regex) patterns.push_back(kGpt2SplitPattern);
      return patterns;
    } else {
      throw Error(what + ": pre_tokenizer " + type +
                  " is not supported (byte-level BPE's steps: Split with a regex, Digits, ByteLevel)");
    }
  }
  throw Error(what + ": the pre_tokenizer has no ByteLevel step, which byte-level BPE needs last");
}

// No normalizer (GPT-2's), or one Unicode normal form (Qwen2's NFC).
UnicodeForm normalizer_of(const nlohmann::json& j, const std::string& what) {
  const auto it = j.find("normalizer");
  if (it == j.end() || it->is_null()) return UnicodeForm::kNone;
  const UnicodeForm form = unicode_form_of(type_of(*it));
  MPT_CHECK(form != UnicodeForm::kNone,
            what + ": normalizer " + type_of(*it) + " is not supported (none, NFC, NFD, NFKC or NFKD)");
  return form;
}

// added_tokens (special or not: transformers cuts both out of the text before the model) as the
// tokenizer's special tokens; `vocab` gains those beyond the model's vocabulary (Llama 3's
// <|begin_of_text|> and the like sit only here), and one it already holds must have the same id.
std::vector<std::string> added_tokens_of(const nlohmann::json& j, nlohmann::json& vocab,
                                         const std::string& what) {
  std::vector<std::string> contents;
  const auto added = j.find("added_tokens");
  if (added == j.end() || added->is_null()) return contents;
  MPT_CHECK(added->is_array(), what + ": added_tokens is not an array");
  for (const nlohmann::json& t : *added) {
    MPT_CHECK(t.is_object() && t.contains("id") && t["id"].is_number_integer() && t.contains("content") &&
                  t["content"].is_string() && !t["content"].get<std::string>().empty(),
              what + ": an added token needs an integer id and a non-empty content");
    const std::string content = t["content"].get<std::string>();
    const int64_t id = t["id"].get<int64_t>();
    if (vocab.contains(content))
      MPT_CHECK(vocab[content].is_number_integer() && vocab[content].get<int64_t>() == id,
                what + ": the added token " + content + " has id " + std::to_string(id) +
                    " but another in the vocabulary");
    else
      vocab[content] = id;
    contents.push_back(content);
  }
  return contents;
}

}  // namespace

Gpt2Files gpt2_files_from_tokenizer_json(std::string_view text, const std::string& path) {
  const std::string what = "'" + path + "'";
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(what + " is not valid JSON: " + e.what());
  }
  MPT_CHECK(j.is_object() && j.contains("model") && j["model"].is_object(), what + ": no \"model\" object");
  const nlohmann::json& model = j["model"];
  const std::string type = type_of(model);
  MPT_CHECK(type != "Unigram",
            what + ": a Unigram model (SentencePiece's) is not supported: only byte-level BPE");
  MPT_CHECK(type == "BPE", what + ": model type " + type + " is not supported: only byte-level BPE");
  for (const char* key : {"dropout", "continuing_subword_prefix", "end_of_word_suffix", "byte_fallback"})
    MPT_CHECK(unset(model, key),
              what + ": the BPE option " + key + " is not supported (GPT-2's BPE has none)");
  Gpt2Files f;
  f.options.normalizer = normalizer_of(j, what);
  f.options.split_patterns =
      split_patterns_of(j.contains("pre_tokenizer") ? j["pre_tokenizer"] : nlohmann::json(), what);
  f.options.ignore_merges = is_true(model, "ignore_merges");
  MPT_CHECK(model.contains("vocab") && model["vocab"].is_object() && model.contains("merges") &&
                model["merges"].is_array(),
            what + ": the BPE model needs a \"vocab\" object and a \"merges\" array");
  nlohmann::json vocab = model["vocab"];
  f.options.special_tokens = added_tokens_of(j, vocab, what);
  f.encoder_json = vocab.dump();
  f.vocab_bpe = "#version: 0.2\n";
  // Merges are "left right" strings (older files) or [left, right] pairs (tokenizers >= 0.20).
  for (const auto& m : model["merges"]) {
    if (m.is_string()) {
      f.vocab_bpe += m.get<std::string>();
    } else {
      MPT_CHECK(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(),
                what + ": a merge is neither \"left right\" nor [left, right]");
      f.vocab_bpe += m[0].get<std::string>() + " " + m[1].get<std::string>();
    }
    f.vocab_bpe += "\n";
  }
  return f;
}

std::string eos_token_from_tokenizer_config(std::string_view text, const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error("'" + path + "' is not valid JSON: " + e.what());
  }
  MPT_CHECK(j.is_object(), "'" + path + "': expected a JSON object");
  const auto it = j.find("eos_token");
  if (it == j.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  // transformers writes an AddedToken as {"__type": "AddedToken", "content": ..., ...}.
  MPT_CHECK(it->is_object() && it->contains("content") && (*it)["content"].is_string(),
            "'" + path + "': eos_token is neither a string nor an object with a string \"content\"");
  return (*it)["content"].get<std::string>();
}

std::string tokenizer_json_from_gpt2_files(std::string_view encoder_json, std::string_view vocab_bpe) {
  const nlohmann::json vocab = nlohmann::json::parse(encoder_json);
  nlohmann::json merges = nlohmann::json::array();
  size_t pos = 0;
  while (pos < vocab_bpe.size()) {
    size_t nl = vocab_bpe.find('\n', pos);
    if (nl == std::string_view::npos) nl = vocab_bpe.size();
    std::string line(vocab_bpe.substr(pos, nl - pos));
    pos = nl + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.starts_with("#version")) continue;
    merges.push_back(line);
  }
  const nlohmann::json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  nlohmann::json j = {{"version", "1.0"},
                      {"truncation", nullptr},
                      {"padding", nullptr},
                      {"added_tokens",
                       {{{"id", vocab.contains(kEot) ? vocab[kEot] : nlohmann::json(nullptr)},
                         {"content", kEot},
                         {"single_word", false},
                         {"lstrip", false},
                         {"rstrip", false},
                         {"normalized", true},
                         {"special", true}}}},
                      {"normalizer", nullptr},
                      {"pre_tokenizer", byte_level},
                      {"post_processor", byte_level},
                      {"decoder", byte_level},
                      {"model",
                       {{"type", "BPE"},
                        {"dropout", nullptr},
                        {"unk_token", nullptr},
                        {"continuing_subword_prefix", ""},
                        {"end_of_word_suffix", ""},
                        {"fuse_unk", false},
                        {"byte_fallback", false},
                        {"vocab", vocab},
                        {"merges", merges}}}};
  return j.dump() + "\n";
}

}  // namespace mptrain
