// The NCCL communicator for GPU ranks: one process per GPU, the GPU picked by the local
// rank, the NCCL unique id broadcast from rank 0 over a host communicator (MPI, or the
// single-process one for a world of one, which still runs every NCCL code path).
//
// Buffers are device memory. Calls are synchronous like every Communicator's (reduce_range
// aside: it returns once enqueued): each enqueues its NCCL operation on the communicator's own
// stream, behind the compute stream's work, and returns when the stream has finished it. The
// wait polls the stream and NCCL's asynchronous error state against the collective timeout; on
// expiry the NCCL communicator is aborted (so no GPU stays stuck in a kernel waiting for a
// peer) and the process ends with one message and status 1.
//
// Implemented in src/backend/cuda (compiled whenever the CUDA backend is) and stubbed in
// src/backend/nocuda, where every entry point throws Error: no #ifdef anywhere.
#pragma once
#include <cstddef>
#include <memory>

#include "dist/communicator.h"

namespace mptrain {

// Was NCCL built into this binary?
bool nccl_compiled();

class Backend;

// Creates the NCCL communicator of bootstrap's ranks (a collective over bootstrap). Its
// collectives start after the work `compute` (the ranks' CUDA backend, which must outlive the
// communicator) has enqueued; without one, after the legacy default stream's. Throws Error when
// this build has no CUDA, the machine no GPU, or compute is not a CUDA backend.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, double timeout_s,
                                                     Backend* compute = nullptr);

}  // namespace mptrain
