// NCCL entry points for a build without CUDA: nothing to communicate with.
#include "core/error.h"
#include "dist/nccl_communicator.h"

namespace mptrain {

namespace {
[[noreturn]] void no_cuda(const char* what) {
  throw Error(std::string(what) + ": this mptrain was built without CUDA, so NCCL is unavailable "
                                  "(rebuild where nvcc and NCCL are installed)");
}
}  // namespace

bool nccl_compiled() { return false; }

std::unique_ptr<Communicator> make_nccl_communicator(Communicator&, double, Backend*) {
  no_cuda("NCCL communicator");
}

}  // namespace mptrain
