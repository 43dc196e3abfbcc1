#include "worker/comm/communicator.h"

#include <algorithm>
#include <string>

namespace tpserve {

absl::Status SingleRankCommunicator::AllGather(absl::Span<const float> in, absl::Span<float> out) {
  if (out.size() != in.size()) {
    return absl::InvalidArgumentError("AllGather: out has " + std::to_string(out.size()) +
                                      " elements, expected " + std::to_string(in.size()));
  }
  std::copy(in.begin(), in.end(), out.begin());
  return absl::OkStatus();
}

absl::Status SingleRankCommunicator::Broadcast(absl::Span<uint8_t>, int root) {
  if (root != 0) {
    return absl::InvalidArgumentError("Broadcast: root " + std::to_string(root) +
                                      " is outside [0, 1)");
  }
  return absl::OkStatus();
}

}  // namespace tpserve
