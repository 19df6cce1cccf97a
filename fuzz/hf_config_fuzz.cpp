// Fuzzes what `mptrain convert --from-hf` reads from a Hugging Face model folder before any
// weights: config.json through read_hf_config (io/hf_folder.h: JSON object check), then both
// families' translations, gpt2_config_from_hf (hf/hf_gpt2.h) and bert_config_from_hf
// (hf/hf_bert.h), which go through the typed hf_config_* field readers; and the same bytes as
// the folder's tokenizer_config.json beside a valid vocab.txt (read_hf_bert_vocab:
// do_lower_case). The readers take a folder, so each input is written into one scratch folder
// per process (under /dev/shm when there is one). A rejected file must throw mptrain::Error;
// an accepted config must pass validate().
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "hf/hf_bert.h"
#include "io/hf_folder.h"
#include "hf/hf_gpt2.h"
#include "model/bert_config.h"
#include "model/gpt2_config.h"

namespace {

void write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out) std::abort();
}

// The scratch model folder (with a fixed vocab.txt), removed at exit.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    const char* base = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
    std::string templ = std::string(base) + "/mptrain_fuzz_hf_config_XXXXXX";
    if (!mkdtemp(templ.data())) std::abort();
    path = templ;
    write(path + "/vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n##s\n");
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ScratchDir dir;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string what = "'config.json'";

  write(dir.path + "/" + mptrain::kHfConfigFile, text);
  nlohmann::json cfg;
  try {
    cfg = mptrain::read_hf_config(dir.path);
  } catch (const mptrain::Error&) {
  }
  if (cfg.is_object()) {
    try {
      mptrain::validate(mptrain::gpt2_config_from_hf(cfg, what, 128));
    } catch (const mptrain::Error&) {
    }
    try {
      mptrain::validate(mptrain::bert_config_from_hf(cfg, what, mptrain::kBertVocabMultiple));
    } catch (const mptrain::Error&) {
    }
  }

  write(dir.path + "/tokenizer_config.json", text);
  try {
    volatile bool lower = mptrain::read_hf_bert_vocab(dir.path, "", 1 << 20).lower_case;
    (void)lower;
  } catch (const mptrain::Error&) {
  }
  return 0;
}
