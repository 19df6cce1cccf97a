// Token ids typed on the command line (token_ids.h).
#include "cli/token_ids.h"

#include <exception>
#include <sstream>

#include "core/error.h"

namespace mptrain {

std::vector<int> parse_token_ids(const std::string& text, const std::string& command) {
  std::string spaced = text;
  for (char& c : spaced)
    if (c == ',') c = ' ';
  std::istringstream in(spaced);
  std::vector<int> ids;
  std::string word;
  while (in >> word) {
    size_t used = 0;
    int id = -1;
    try {
      id = std::stoi(word, &used);
    } catch (const std::exception&) {
      used = 0;  // not a number, or out of int's range
    }
    if (used != word.size()) throw Error(command + ": '" + word + "' is not a token id");
    ids.push_back(id);
  }
  return ids;
}

}  // namespace mptrain
