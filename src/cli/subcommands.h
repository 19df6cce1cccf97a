// Registration of subcommands: each cmd_<name>.cpp defines one register function
// that adds its options to the app and sets a callback that stores its exit code.
#pragma once
#include <vector>

#include "core/error.h"

namespace CLI {
class App;
}

namespace mptrain {

using RegisterFn = void (*)(CLI::App& app, int& exit_code);

void register_prepare(CLI::App& app, int& exit_code);
void register_train(CLI::App& app, int& exit_code);
void register_generate(CLI::App& app, int& exit_code);
void register_bench(CLI::App& app, int& exit_code);
void register_tokenize(CLI::App& app, int& exit_code);
void register_convert(CLI::App& app, int& exit_code);
void register_eval(CLI::App& app, int& exit_code);
void register_report(CLI::App& app, int& exit_code);
void register_explain(CLI::App& app, int& exit_code);
void register_tokenizer(CLI::App& app, int& exit_code);
void register_fill_mask(CLI::App& app, int& exit_code);
void register_predict(CLI::App& app, int& exit_code);

inline std::vector<RegisterFn> all_subcommands() {
  return {register_prepare, register_train, register_generate, register_bench, register_tokenize,
          register_convert, register_eval, register_report, register_tokenizer, register_explain,
          register_fill_mask, register_predict};
}

}  // namespace mptrain
