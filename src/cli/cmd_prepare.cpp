// `mptrain prepare` (placeholder registration; options and work are added by its issue).
#include <CLI/CLI.hpp>

#include "cli/subcommands.h"

namespace mptrain {

void register_prepare(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("prepare", "prepare (not yet available)");
  cmd->callback([&exit_code]() { throw Error("'prepare' is not implemented yet"); });
  (void)exit_code;
}

}  // namespace mptrain
