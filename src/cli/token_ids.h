// Token ids typed on the command line (`tokenize --decode`, `tokenizer decode`): the one
// parser both decoders use, so "12, 34 56" means the same ids to either.
#pragma once
#include <string>
#include <vector>

namespace mptrain {

// Ids separated by spaces and/or commas. A word that is not a whole integer is an Error
// naming it, prefixed by `command` (e.g. "tokenize --decode").
std::vector<int> parse_token_ids(const std::string& text, const std::string& command);

}  // namespace mptrain
