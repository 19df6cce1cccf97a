// Fuzzes the HellaSwag jsonl reader (eval/hellaswag.h): one JSON object per line with ctx (or
// ctx_a/ctx_b), 4 endings and a label. A rejected file must throw mptrain::Error naming the
// line; an accepted example must have 4 endings and a label among them.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "eval/hellaswag.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    for (const mptrain::McExample& ex : mptrain::parse_hellaswag(text, "fuzz.jsonl"))
      if (ex.endings.size() != 4 || ex.label < 0 || ex.label >= 4 || ex.line < 1) __builtin_trap();
  } catch (const mptrain::Error&) {
  }
  return 0;
}
