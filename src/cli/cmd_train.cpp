// `mptrain train` (placeholder registration; options and work are added by its issue).
#include <CLI/CLI.hpp>

#include "cli/subcommands.h"

namespace mptrain {

void register_train(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("train", "train (not yet available)");
  cmd->callback([&exit_code]() { throw Error("'train' is not implemented yet"); });
  (void)exit_code;
}

}  // namespace mptrain
