// gpt2_config_from_hf on config.json values a fuzz run of fuzz_model_config turned up: a
// layer_norm_epsilon or initializer_range too large for a float (1e300) used to become an
// infinite float and pass the "positive" check; it must be a clear error.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "hf/hf_gpt2.h"

namespace mptrain {
namespace {

nlohmann::json config() {
  return {{"model_type", "gpt2"}, {"n_layer", 2},  {"n_head", 2},
          {"n_embd", 64},         {"n_positions", 64}, {"vocab_size", 50257}};
}

void expect_error(const nlohmann::json& cfg, const std::string& needle) {
  try {
    gpt2_config_from_hf(cfg, "'config.json'", 128);
    ADD_FAILURE() << "accepted " << cfg.dump();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(HfConfigValues, HugeFloatsAreErrors) {
  EXPECT_EQ(gpt2_config_from_hf(config(), "'config.json'", 128).n_embd, 64);
  nlohmann::json c = config();
  c["layer_norm_epsilon"] = 1e300;
  expect_error(c, "layer_norm_epsilon must be positive and finite");
  c = config();
  c["initializer_range"] = -1e300;
  expect_error(c, "initializer_range must be finite");
  c = config();
  c["n_layer"] = 1e300;  // an integer field given as a float
  expect_error(c, "'n_layer' must be a positive integer");
}

}  // namespace
}  // namespace mptrain
