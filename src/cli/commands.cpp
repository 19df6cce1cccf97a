// Subcommand dispatch (CLI11). Each subcommand lives in its own cmd_<name>.cpp
// and registers itself here; its callback runs after parsing succeeds.
#include "cli/commands.h"

#include <CLI/CLI.hpp>

#include "cli/subcommands.h"

namespace mptrain {

int run_cli(int argc, char** argv) {
  CLI::App app{"mptrain: GPT-2 and BERT training in fp32, TF32, bf16 and fp16 (CPU; MPI data parallelism; a CUDA backend not yet run on a GPU)"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  int exit_code = 0;
  for (auto* reg : all_subcommands()) reg(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One clear line, like every other error, and a non-zero exit.
    throw Error(e.what());
  }
  return exit_code;
}

}  // namespace mptrain
