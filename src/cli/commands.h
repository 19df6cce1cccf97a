// The subcommands of the mptrain executable.
#pragma once

namespace mptrain {

int run_cli(int argc, char** argv);

}  // namespace mptrain
