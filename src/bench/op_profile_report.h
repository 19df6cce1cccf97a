// `mptrain bench --profile`: the table of where a training step's time goes, op by op
// (backend/op_profile.h), each op against what limits it — a product (GEMM, attention) against
// the FMA peak measured on this machine, every other op against its measured memory bandwidth
// — and what is left between the ops (the model's host code, staging, the optimizer's loop).
#pragma once
#include "backend/op_profile.h"
#include "train/peak_flops.h"

namespace mptrain {

// The machine's memory bandwidth in GB/s, measured now: the best of a few copies of a 256 MiB
// buffer over the OpenMP threads, counting the bytes read and written (STREAM's "copy").
double measure_memory_bandwidth_gbs();

// Prints the profile of `steps` steps whose wall time was `step_wall_s` in all. Products are
// measured against `fma_tflops` (measure_fma_peak_tflops: what the cores sustain), or against
// the MFU estimate `peak` where that is 0.
// model_flops: the step's model FLOPs (MFU's count), said as a share of the same peak.
void print_op_profile(const OpProfile& profile, int steps, double step_wall_s, double model_flops,
                      const PeakFlops& peak, double fma_tflops, double bandwidth_gbs);

}  // namespace mptrain
