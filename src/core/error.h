// Typed errors. Library code throws; only main() turns an exception into one
// clear line on stderr and a non-zero exit code.
#pragma once
#include <stdexcept>
#include <string>

namespace mptrain {

// A user-facing problem: bad input, bad configuration, bad file.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A failing call into a library (oneDNN, CUDA, ...), with its text and location.
class LibraryError : public Error {
 public:
  using Error::Error;
};

[[noreturn]] void throw_library_error(const char* lib, const char* call, const std::string& what,
                                      const char* file, int line);

// MPT_CHECK(cond, msg): validate an argument or input; throws Error(msg).
#define MPT_CHECK(cond, msg)                                  \
  do {                                                        \
    if (!(cond)) throw ::mptrain::Error(std::string(msg));    \
  } while (0)

}  // namespace mptrain
