// The MPI communicator for CPU ranks (Open MPI from Debian; any MPI-3 library works).
// Host buffers; collectives are MPI's blocking ones on a duplicate of MPI_COMM_WORLD,
// each watched by a CollectiveWatchdog (watchdog.h) for the collective timeout.
#pragma once
#include <memory>

#include "dist/communicator.h"

namespace mptrain {

// Initialises MPI (once per process: MPI cannot be initialised again after it is finalised)
// and returns the communicator of all ranks. `launcher` is what the environment said
// (topology_from_environment); MPI's own view is checked against it, so that a launcher MPI
// cannot talk to (e.g. srun without --mpi=pmix) fails with a message instead of training
// world-size copies of rank 0. The destructor waits for every rank (a barrier under the
// timeout) and finalises MPI, unless an exception is unwinding: then it leaves MPI as it is,
// main() reports the error, and the launcher stops the other ranks on the non-zero exit.
std::unique_ptr<Communicator> make_mpi_communicator(const Topology& launcher, double timeout_s);

}  // namespace mptrain
