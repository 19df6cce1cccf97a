// Formatting of library-call failures, shared by every check macro.
#include "core/error.h"

namespace mptrain {

void throw_library_error(const char* lib, const char* call, const std::string& what, const char* file,
                         int line) {
  throw LibraryError(std::string("[") + lib + "] " + call + " failed: " + what + " (" + file + ":" +
                     std::to_string(line) + ")");
}

}  // namespace mptrain
