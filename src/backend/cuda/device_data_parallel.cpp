// NCCL data parallelism of the device steppers (backend/cuda/device_data_parallel.h).
#include "backend/cuda/device_data_parallel.h"

#include <chrono>
#include <cstdint>

#include "backend/device.h"
#include "dist/data_parallel.h"
#include "dist/nccl_communicator.h"

namespace mptrain::cuda {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

bool sharded_of(const DeviceParallel& par) { return par.dp && par.dp->zero() == ZeroStage::One; }

}  // namespace

DeviceDataParallel::DeviceDataParallel(const DeviceParallel& par) : par_(par) {
  if (!par.dp || !(par.nccl || par.dp->world_size() > 1)) return;
  Communicator& host = par.dp->comm();
  nccl_ = make_nccl_communicator(host, host.timeout_seconds());
  async_ = nccl_async(*nccl_);
  world_ = nccl_->world_size();
}

DeviceDataParallel::~DeviceDataParallel() = default;

int DeviceDataParallel::device_of(const DeviceParallel& par) {
  const int devices = cuda_device_count();
  return par.dp && devices > 0 ? par.dp->comm().local_rank() % devices : 0;
}

std::vector<FlatRange> DeviceDataParallel::owned_segments(const DeviceParallel& par) {
  if (!sharded_of(par)) return {};
  return {{par.dp->begin(), par.dp->end()}};
}

bool DeviceDataParallel::sharded() const { return sharded_of(par_); }

void DeviceDataParallel::attach(DeviceOptimizer& optimizer) {
  // Replicated state sees the same averaged gradients on every rank: nothing to combine.
  if (!nccl_ || !sharded()) return;
  optimizer.set_reducer(
      {[this](double x) { return nccl_->sum(x); }, [this](bool f) { return nccl_->any(f); }});
}

std::function<void(size_t, size_t)> DeviceDataParallel::grad_ready(DeviceOptimizer& optimizer, Context& ctx) {
  if (!async_) return nullptr;
  const Partition* part = sharded() ? &par_.dp->partition() : nullptr;
  return [this, part, &optimizer, &ctx](size_t begin, size_t end) {
    async_->reduce_async(optimizer.grads(), begin, end, part, ReduceOp::Avg, ctx.stream());
  };
}

double DeviceDataParallel::sum_over_ranks(double local) {
  if (!nccl_) return local;
  const auto start = std::chrono::steady_clock::now();
  async_->wait_async();
  const double sum = nccl_->sum(local);
  comm_seconds_ += seconds_since(start);
  return sum;
}

void DeviceDataParallel::gather_params(DeviceOptimizer& optimizer, Context& ctx) {
  if (!nccl_ || !sharded()) return;
  ctx.synchronize();  // the update (and its 16-bit copy) is on ctx's stream, NCCL has its own
  const auto start = std::chrono::steady_clock::now();
  if (void* copy = optimizer.param_copy()) {
    // bf16 and fp16 alike: 16 bits a value, moved as they are.
    nccl_->all_gather(static_cast<std::uint16_t*>(copy), par_.dp->partition());
    masters_whole_ = false;
  } else {
    nccl_->all_gather(optimizer.params(), par_.dp->partition());
  }
  comm_seconds_ += seconds_since(start);
}

// Not counted in comm_seconds_: it belongs to no step (comm_ms is per step).
void DeviceDataParallel::whole_masters(DeviceOptimizer& optimizer, Context& ctx) {
  if (masters_whole_) return;
  ctx.synchronize();
  nccl_->all_gather(optimizer.params(), par_.dp->partition());
  masters_whole_ = true;
}

double DeviceDataParallel::take_comm_seconds() {
  const double s = comm_seconds_;
  comm_seconds_ = 0.0;
  return s;
}

}  // namespace mptrain::cuda
