#include "comm/communicator.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tpserve {

absl::Status Communicator::AllReduceSum(void* data, int64_t count, DType dtype) {
  if (dtype != DType::kF32) {
    return absl::UnimplementedError(absl::StrCat(Describe(), ": AllReduceSum of ",
                                                 std::string(DTypeName(dtype)),
                                                 " is not implemented (f32 only)"));
  }
  return AllReduceSum(absl::MakeSpan(static_cast<float*>(data), count));
}

absl::Status Communicator::AllGather(const void* in, int64_t in_count, DType dtype, void* out) {
  if (dtype != DType::kF32) {
    return absl::UnimplementedError(absl::StrCat(Describe(), ": AllGather of ",
                                                 std::string(DTypeName(dtype)),
                                                 " is not implemented (f32 only)"));
  }
  return AllGather(absl::MakeConstSpan(static_cast<const float*>(in), in_count),
                   absl::MakeSpan(static_cast<float*>(out), in_count * world_size()));
}

absl::Status Communicator::Gather(const void* in, int64_t in_count, DType dtype, void* out,
                                  int root) {
  TP_RETURN_IF_ERROR(CheckBroadcastRoot(world_size(), root, "Gather"));
  if (in_count < 0) {
    return absl::InvalidArgumentError(absl::StrCat("Gather: in_count ", in_count, " is below 0"));
  }
  std::vector<int64_t> send_counts(world_size(), 0), recv_counts(world_size(), 0);
  send_counts[root] = in_count;
  if (rank() == root) std::fill(recv_counts.begin(), recv_counts.end(), in_count);
  return AllToAll(in, send_counts, out, recv_counts, dtype);
}

std::string Communicator::Describe() const {
  return "rank " + std::to_string(rank()) + "/" + std::to_string(world_size());
}

absl::Status BroadcastInt32s(Communicator& comm, absl::Span<int32_t> values, int root) {
  return comm.Broadcast(
      absl::MakeSpan(reinterpret_cast<uint8_t*>(values.data()), values.size() * sizeof(int32_t)),
      root);
}

absl::Status CheckAllGatherSizes(int world_size, size_t in_count, size_t out_count) {
  const size_t expected = static_cast<size_t>(world_size) * in_count;
  if (out_count != expected) {
    return absl::InvalidArgumentError("AllGather: out has " + std::to_string(out_count) +
                                      " elements, expected " + std::to_string(expected) + " (" +
                                      std::to_string(world_size) + " ranks x " +
                                      std::to_string(in_count) + ")");
  }
  return absl::OkStatus();
}

absl::Status CheckBroadcastRoot(int world_size, int root, std::string_view collective) {
  if (root < 0 || root >= world_size) {
    return absl::InvalidArgumentError(std::string(collective) + ": root " + std::to_string(root) +
                                      " is outside [0, " + std::to_string(world_size) + ")");
  }
  return absl::OkStatus();
}

absl::Status CheckAllToAllCounts(int world_size, absl::Span<const int64_t> send_counts,
                                 absl::Span<const int64_t> recv_counts, DType dtype) {
  if (BlockElems(dtype) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("AllToAll: ", std::string(DTypeName(dtype)),
                                                   " is block-quantized; it moves whole elements"));
  }
  for (const auto& [name, counts] :
       {std::pair{"send_counts", send_counts}, std::pair{"recv_counts", recv_counts}}) {
    if (counts.size() != static_cast<size_t>(world_size)) {
      return absl::InvalidArgumentError(absl::StrCat("AllToAll: ", name, " has ", counts.size(),
                                                     " entries, expected one per rank (",
                                                     world_size, ")"));
    }
    for (int r = 0; r < world_size; ++r) {
      if (counts[r] < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("AllToAll: ", name, "[", r, "] is ", counts[r], ", below 0"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status SingleRankCommunicator::AllToAll(const void* in,
                                              absl::Span<const int64_t> send_counts, void* out,
                                              absl::Span<const int64_t> recv_counts,
                                              DType dtype) {
  absl::Status status = CheckAllToAllCounts(1, send_counts, recv_counts, dtype);
  if (!status.ok()) return status;
  if (send_counts[0] != recv_counts[0]) {
    return absl::InvalidArgumentError(absl::StrCat("AllToAll: rank 0 sends itself ",
                                                   send_counts[0], " elements but expects ",
                                                   recv_counts[0]));
  }
  if (send_counts[0] > 0) std::memcpy(out, in, send_counts[0] * BlockBytes(dtype));
  return absl::OkStatus();
}

absl::Status SingleRankCommunicator::AllGather(absl::Span<const float> in, absl::Span<float> out) {
  absl::Status status = CheckAllGatherSizes(1, in.size(), out.size());
  if (!status.ok()) return status;
  std::copy(in.begin(), in.end(), out.begin());
  return absl::OkStatus();
}

absl::Status SingleRankCommunicator::Broadcast(absl::Span<uint8_t>, int root) {
  return CheckBroadcastRoot(1, root);
}

}  // namespace tpserve
