// The asynchronous side of the NCCL communicator (dist/nccl_communicator.h), for overlapping a
// step's gradient reduction with its backward: each range of the gradients is reduced on the
// communicator's own stream as soon as the compute stream has made it final (an event orders
// the two streams; the host does not wait), and the step waits once for all of them. The wait
// polls NCCL's error state and the stream against the collective timeout and aborts the
// communicator on expiry, like every synchronous call. CUDA types stay out of this header.
#pragma once
#include <cstddef>

#include "dist/communicator.h"

struct CUstream_st;

namespace mptrain::cuda {

class NcclAsync {
 public:
  virtual ~NcclAsync() = default;
  // Enqueues, after everything enqueued so far on `after` (the compute stream), the reduction
  // (op over ranks) of data[begin, end): to every rank (part null: an all-reduce), or each
  // piece to the rank whose shard of *part holds it (ZeRO-1: slices_of, one NCCL group).
  // Returns once NCCL has accepted the work, not when it has run.
  virtual void reduce_async(float* data, size_t begin, size_t end, const Partition* part, ReduceOp op,
                            CUstream_st* after) = 0;
  // Returns when every enqueued reduction has run (the host waits; the timeout applies).
  virtual void wait_async() = 0;
};

// comm's asynchronous side when it is an NCCL communicator; null otherwise.
NcclAsync* nccl_async(Communicator& comm);

}  // namespace mptrain::cuda
