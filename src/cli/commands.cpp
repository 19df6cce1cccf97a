// Subcommand dispatch (CLI11). Each subcommand lives in its own cmd_<name>.cpp
// and registers itself here; its callback runs after parsing succeeds.
// --config FILE reads options from a TOML file, one table per subcommand ([train], [bench] ...),
// with CLI11's own config reader (so no second TOML library); options given on the command line
// win over the file's, and a key that is no option of its table's subcommand is an error.
#include "cli/commands.h"

#include <CLI/CLI.hpp>
#include <string>

#include "cli/subcommands.h"

namespace mptrain {

int run_cli(int argc, char** argv) {
  CLI::App app{"mptrain: GPT-2 and BERT training in fp32, TF32, bf16 and fp16 (CPU, CUDA; MPI/NCCL data parallelism)"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  app.set_config("--config", "",
                 "Options from a TOML file: a [train] (or [bench], [eval] ...) table of option = value "
                 "(recipes/*.toml); options on the command line win");
  app.allow_config_extras(CLI::config_extras_mode::error);
  int exit_code = 0;
  for (auto* reg : all_subcommands()) reg(app, exit_code);
  // `mptrain train --config FILE`: the root's --config is reachable after the subcommand.
  for (CLI::App* sub : app.get_subcommands({})) sub->fallthrough();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::FileError& e) {  // CLI11 reads no file but --config's
    throw Error(std::string("--config: ") + e.what());
  } catch (const CLI::ConfigError& e) {
    // CLI11 says "INI was not able to parse train.bogus" for a key no option takes.
    const std::string what = e.what(), tag = "not able to parse ";
    const size_t at = what.find(tag);
    if (at == std::string::npos) throw Error("--config: " + what);
    const std::string key = what.substr(at + tag.size());
    throw Error("--config: '" + key + "' is not an option of the subcommand its table names (a recipe holds a [train] "
                "table of train's long options without the dashes, e.g. batch = 8)");
  } catch (const CLI::ParseError& e) {
    // One clear line, like every other error, and a non-zero exit.
    throw Error(e.what());
  }
  return exit_code;
}

}  // namespace mptrain
