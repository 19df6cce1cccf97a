// Fuzzes the two model-config readers: the "mptrain_config" JSON a checkpoint's
// model.safetensors carries (parse_checkpoint_config) and a Hugging Face config.json
// (hf/hf_gpt2.h, gpt2_config_from_hf, as `mptrain convert` reads it). The same bytes go to
// both. A rejected config must throw mptrain::Error; an accepted one must pass validate().
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "hf/hf_gpt2.h"
#include "train/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    mptrain::Gpt2Config c = mptrain::parse_checkpoint_config(text, "'model config'");
    mptrain::validate(c);
  } catch (const mptrain::Error&) {
  }
  // config.json: read_hf_config's parse (JSON object), then the GPT-2 fields.
  nlohmann::json cfg = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (cfg.is_object()) {
    try {
      mptrain::Gpt2Config c = mptrain::gpt2_config_from_hf(cfg, "'config.json'", 128);
      mptrain::validate(c);
    } catch (const mptrain::Error&) {
    }
  }
  return 0;
}
