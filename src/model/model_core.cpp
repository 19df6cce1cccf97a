#include "model/model_core.h"

#include "model/policy_backend.h"

namespace mptrain {

ModelCore::ModelCore(ParamTable table, std::unique_ptr<Backend> be, const Policy& policy)
    : precision_(policy.precision),
      policy_(policy),
      mixed_(!policy.all_fp32()),
      table_(std::move(table)),
      be_(std::move(be)),
      at_(attention_dtypes(policy)) {
  MemoryResource& memory = be_->memory();
  params_.resize(table_.total(), memory);
  grads_.resize(table_.total(), memory);
  wgrads_.setup(table_.total(), policy_, memory);
  check_policy_supported(policy_, *be_);
}

ModelCore::~ModelCore() = default;

}  // namespace mptrain
