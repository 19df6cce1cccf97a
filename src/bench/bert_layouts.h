// `mptrain bench --model bert --data FILE`: BERT training steps on a real instance file, padded
// (B rows of T under an attention mask) against unpadded (the instances packed back to back,
// model/bert.h's cu_seqlens), on the same batches in the same invocation, alternating rounds.
// Speed is real tokens per second (the instances' own tokens, [CLS]/[SEP] included, padding
// not), since that is the work a run gets done; the ratio is unpadded over padded.
#pragma once

#include "bench/bench.h"

namespace mptrain {

struct LayoutResult {
  double ms_per_step = 0.0;        // median over rounds of each round's mean
  double real_tokens_per_s = 0.0;  // median over rounds
  double real_fraction = 0.0;      // real tokens / (B·T) over the timed batches
};

// Both layouts (o.batch_layout "both"), or one; prints per round and a summary with the ratio.
// Returns the unpadded result (the padded one when only it ran).
LayoutResult bench_bert_layouts(const BenchOptions& o);

}  // namespace mptrain
