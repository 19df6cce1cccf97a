// Fuzzes the JSON a BERT checkpoint carries, through the public readers of
// train/bert_checkpoint.h: the same bytes are written as the checkpoint's state.json
// (load_bert_checkpoint_state: step, loader position, seed) and tokenizer_config.json
// (bert_checkpoint_lower_case), and parsed as the "mptrain_config" metadata
// (bert_config_from_json, what load_bert_checkpoint_config hands it). These readers take a
// directory, so each input goes through one scratch directory per process (under /dev/shm when
// there is one: no disk traffic). A rejected file must throw mptrain::Error; any other
// exception (e.g. nlohmann's type_error from a field of the wrong type) or UB (an out-of-range
// number converted to an integer) is a finding; an accepted config must pass validate().
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "model/bert_config.h"
#include "train/bert_checkpoint.h"

namespace {

// The scratch checkpoint directory, removed at exit.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    const char* base = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
    std::string templ = std::string(base) + "/mptrain_fuzz_bert_ckpt_XXXXXX";
    if (!mkdtemp(templ.data())) std::abort();
    path = templ;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

void write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ScratchDir dir;
  const std::string text(reinterpret_cast<const char*>(data), size);

  write(dir.path + "/state.json", text);
  try {
    mptrain::BertTrainState s = mptrain::load_bert_checkpoint_state(dir.path);
    volatile int64_t sink = s.step + s.train_pos.index + s.train_pos.epoch;
    (void)sink;
  } catch (const mptrain::Error&) {
  }

  write(dir.path + "/tokenizer_config.json", text);
  try {
    volatile bool lower = mptrain::bert_checkpoint_lower_case(dir.path);
    (void)lower;
  } catch (const mptrain::Error&) {
  }

  // mptrain_config: load_bert_checkpoint_config parses the metadata string, then this.
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) {
    try {
      mptrain::validate(mptrain::bert_config_from_json(j, "'model config'"));
    } catch (const mptrain::Error&) {
    }
  }
  return 0;
}
