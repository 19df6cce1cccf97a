// Fuzzes the reader of a checkpoint's state.json (train/checkpoint.h, parse_checkpoint_state):
// step, data position, seeds, precision, fp16 loss-scaler state. A rejected file must throw
// mptrain::Error; any other exception or UB (e.g. an out-of-range number converted to int)
// is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "train/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    mptrain::TrainState s = mptrain::parse_checkpoint_state(text, "'state.json'");
    volatile int64_t sink = s.step + s.train_pos.offset;
    (void)sink;
  } catch (const mptrain::Error&) {
  }
  return 0;
}
