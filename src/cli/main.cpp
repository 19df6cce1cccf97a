// mptrain's entry point: parses the subcommand and turns any exception into one
// clear error line and a non-zero exit code.
#include <cstdio>
#include <exception>

#include "cli/commands.h"

int main(int argc, char** argv) {
  try {
    return mptrain::run_cli(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mptrain: error: %s\n", e.what());
    return 1;
  }
}
