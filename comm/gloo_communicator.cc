#include "comm/gloo_communicator.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/all_to_all_counts.h"
#include "comm/rendezvous_store.h"
#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/alltoallv.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/transport/tcp/device.h"

namespace tpserve {
namespace {

// Gloo signals every failure with an exception whose text is all we get; its timeouts say
// "timeout" or "Timed out", anything else (peer closed, reset, enforce) means the link is gone.
absl::Status StatusFromGlooError(const std::string& what_failed, const std::string& message) {
  const std::string lower = absl::AsciiStrToLower(message);
  const std::string text = absl::StrCat(what_failed, ": ", message);
  if (absl::StrContains(lower, "timeout") || absl::StrContains(lower, "timed out")) {
    return absl::DeadlineExceededError(text);
  }
  return absl::UnavailableError(text);
}

// Gloo writes with writev(2); a write to a peer that died would raise SIGPIPE and kill this
// process before Gloo can report the error. Ignore it unless the program installed a handler.
void IgnoreSigpipeUnlessHandled() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
    signal(SIGPIPE, SIG_IGN);
  }
}

// AllToAll's id in VerifySameCall's records (the others: AllReduceSum 1, AllGather 2,
// Broadcast 3, Barrier 4); its record also carries every rank's counts.
constexpr int kAllToAllId = 5;

std::chrono::milliseconds ToChrono(absl::Duration d) {
  return std::chrono::milliseconds(absl::ToInt64Milliseconds(d));
}

}  // namespace

absl::Status ValidateGlooOptions(const GlooOptions& options) {
  if (options.world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("GlooOptions.world_size is ", options.world_size, ", must be >= 1"));
  }
  if (options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("GlooOptions.rank is ", options.rank,
                                                   ", must be in [0, ", options.world_size, ")"));
  }
  if (options.timeout < absl::Milliseconds(1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GlooOptions.timeout is ", absl::FormatDuration(options.timeout), ", must be >= 1ms"));
  }
  if (options.hostname.empty() && options.iface.empty()) {
    return absl::InvalidArgumentError("GlooOptions: hostname and iface are both empty");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<GlooCommunicator>> GlooCommunicator::Connect(
    const GlooOptions& options, gloo::rendezvous::Store& store) {
  absl::Status valid = ValidateGlooOptions(options);
  if (!valid.ok()) return valid;
  if (options.world_size == 1) {
    return std::unique_ptr<GlooCommunicator>(new GlooCommunicator(options, nullptr));
  }
  IgnoreSigpipeUnlessHandled();
  const absl::Duration startup = StartupTimeout(options.startup_timeout, options.timeout);
  const std::string who =
      absl::StrCat("Gloo connect of rank ", options.rank, " of ", options.world_size, " (timeout ",
                   absl::FormatDuration(startup), ")");
  try {
    auto context = std::make_shared<gloo::rendezvous::Context>(options.rank, options.world_size);
    context->setTimeout(ToChrono(startup));  // the first collective's too
    gloo::transport::tcp::attr attr;
    if (options.iface.empty()) {
      attr.hostname = options.hostname;
    } else {
      attr.iface = options.iface;
    }
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    context->connectFullMesh(store, device);
    return std::unique_ptr<GlooCommunicator>(new GlooCommunicator(options, std::move(context)));
  } catch (const std::exception& e) {
    return StatusFromGlooError(who, e.what());
  } catch (...) {
    return absl::UnavailableError(absl::StrCat(who, ": unknown exception"));
  }
}

absl::StatusOr<std::unique_ptr<GlooCommunicator>> GlooCommunicator::ConnectWithFileStore(
    const GlooOptions& options, const std::string& store_dir, const std::string& run_id) {
  std::unique_ptr<GlooCommunicator> comm;
  TP_RETURN_IF_ERROR(WithFileStore(store_dir, run_id, "Gloo",
                                   [&](gloo::rendezvous::Store& store) -> absl::Status {
                                     TP_ASSIGN_OR_RETURN(comm, Connect(options, store));
                                     return absl::OkStatus();
                                   }));
  return comm;
}

GlooCommunicator::GlooCommunicator(const GlooOptions& options,
                                   std::shared_ptr<gloo::Context> context)
    : options_(options), context_(std::move(context)) {}

GlooCommunicator::~GlooCommunicator() = default;

template <typename Fn>
absl::Status GlooCommunicator::Guarded(const char* collective, Fn&& fn) {
  const std::string who = absl::StrCat(collective, " on ", Describe());
  if (!broken_reason_.empty()) {
    return absl::UnavailableError(
        absl::StrCat(who, ": communicator is broken by an earlier failure: ", broken_reason_));
  }
  absl::Status status;
  const bool first = !started_;
  started_ = true;
  try {
    fn();
    if (first && context_ != nullptr) context_->setTimeout(ToChrono(options_.timeout));  // warm
    return absl::OkStatus();
  } catch (const std::exception& e) {
    status = StatusFromGlooError(who, e.what());
  } catch (...) {
    status = absl::UnavailableError(absl::StrCat(who, ": unknown exception"));
  }
  broken_reason_ = std::string(status.message());
  return status;
}

absl::Status GlooCommunicator::VerifySameCall(int collective_id, const char* collective,
                                              int64_t count, int64_t root,
                                              absl::Span<const int64_t> all_to_all_row) {
  if (!options_.verify_collectives || context_ == nullptr) return absl::OkStatus();
  // Every call sends a record of the same size, whatever the collective (Gloo's all-gather
  // needs equal sizes): (collective, count, root), then the all-to-all counts or zeros.
  constexpr size_t kCall = 3;
  const size_t row = 2 * static_cast<size_t>(options_.world_size);
  std::vector<int64_t> mine(kCall + row, 0);
  mine[0] = collective_id;
  mine[1] = count;
  mine[2] = root;
  std::copy(all_to_all_row.begin(), all_to_all_row.end(), mine.begin() + kCall);
  std::vector<int64_t> all(mine.size() * options_.world_size);
  absl::Status exchanged = Guarded(collective, [&] {
    gloo::AllgatherOptions opts(context_);
    opts.setInput(mine.data(), mine.size());
    opts.setOutput(all.data(), all.size());
    gloo::allgather(opts);
  });
  if (!exchanged.ok()) return exchanged;
  const auto describe = [](const int64_t* call) {
    if (call[0] == kAllToAllId) return absl::StrCat("AllToAll of ", call[1], "-byte elements");
    return absl::StrCat("collective #", call[0], " with ", call[1], " elements and root ", call[2]);
  };
  const std::string who = absl::StrCat(collective, " on ", Describe(), ": ranks disagree: ");
  std::vector<int64_t> table;
  for (int r = 0; r < options_.world_size; ++r) {
    const int64_t* theirs = &all[r * mine.size()];
    if (!std::equal(mine.begin(), mine.begin() + kCall, theirs)) {
      return absl::InvalidArgumentError(absl::StrCat(who, "this rank called ",
                                                     describe(mine.data()), ", rank ", r,
                                                     " called ", describe(theirs)));
    }
    table.insert(table.end(), theirs + kCall, theirs + kCall + row);
  }
  if (collective_id != kAllToAllId) return absl::OkStatus();
  absl::Status pairs = CheckAllToAllPairs(options_.world_size, table);
  if (!pairs.ok()) return absl::InvalidArgumentError(absl::StrCat(who, pairs.message()));
  return absl::OkStatus();
}

absl::Status GlooCommunicator::AllReduceSum(absl::Span<float> data) {
  absl::Status same = VerifySameCall(1, "AllReduceSum", data.size(), 0);
  if (!same.ok()) return same;
  return Guarded("AllReduceSum", [&] {
    if (context_ == nullptr || data.empty()) return;
    gloo::AllreduceOptions opts(context_);
    // Ring: the reduced chunks are then copied around, so all ranks end with the same bits.
    opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    opts.setOutput(data.data(), data.size());
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    gloo::allreduce(opts);
  });
}

absl::Status GlooCommunicator::AllGather(absl::Span<const float> in, absl::Span<float> out) {
  absl::Status sizes = CheckAllGatherSizes(world_size(), in.size(), out.size());
  if (!sizes.ok()) return sizes;
  absl::Status same = VerifySameCall(2, "AllGather", in.size(), 0);
  if (!same.ok()) return same;
  return Guarded("AllGather", [&] {
    if (in.empty()) return;
    if (context_ == nullptr) {
      std::copy(in.begin(), in.end(), out.begin());
      return;
    }
    gloo::AllgatherOptions opts(context_);
    // Gloo only reads the input, but its API takes a mutable pointer.
    opts.setInput(const_cast<float*>(in.data()), in.size());
    opts.setOutput(out.data(), out.size());
    gloo::allgather(opts);
  });
}

absl::Status GlooCommunicator::AllToAll(const void* in, absl::Span<const int64_t> send_counts,
                                        void* out, absl::Span<const int64_t> recv_counts,
                                        DType dtype) {
  TP_RETURN_IF_ERROR(CheckAllToAllCounts(world_size(), send_counts, recv_counts, dtype));
  const int64_t elem_bytes = BlockBytes(dtype);
  TP_RETURN_IF_ERROR(VerifySameCall(kAllToAllId, "AllToAll", elem_bytes, 0,
                                    AllToAllCountsRow(send_counts, recv_counts)));
  if (context_ == nullptr) {
    return SingleRankCommunicator().AllToAll(in, send_counts, out, recv_counts, dtype);
  }
  const int me = options_.rank;
  if (send_counts[me] != recv_counts[me]) {  // Gloo would throw, and the link would be broken
    return absl::InvalidArgumentError(absl::StrCat("AllToAll on ", Describe(),
                                                   ": this rank sends itself ", send_counts[me],
                                                   " elements but expects ", recv_counts[me]));
  }
  // Gloo takes byte counts as elements of uint8_t, and a buffer even when it is empty.
  std::vector<int64_t> send_bytes(send_counts.begin(), send_counts.end());
  std::vector<int64_t> recv_bytes(recv_counts.begin(), recv_counts.end());
  for (int64_t& n : send_bytes) n *= elem_bytes;
  for (int64_t& n : recv_bytes) n *= elem_bytes;
  uint8_t none = 0;
  // Gloo only reads the input, but its API takes a mutable pointer.
  auto* send = in != nullptr ? static_cast<uint8_t*>(const_cast<void*>(in)) : &none;
  auto* recv = out != nullptr ? static_cast<uint8_t*>(out) : &none;
  return Guarded("AllToAll", [&] {
    gloo::AlltoallvOptions opts(context_);
    opts.setInput(send, send_bytes);
    opts.setOutput(recv, recv_bytes);
    gloo::alltoallv(opts);
  });
}

absl::Status GlooCommunicator::Broadcast(absl::Span<uint8_t> data, int root) {
  absl::Status valid_root = CheckBroadcastRoot(world_size(), root);
  if (!valid_root.ok()) return valid_root;
  absl::Status same = VerifySameCall(3, "Broadcast", data.size(), root);
  if (!same.ok()) return same;
  return Guarded("Broadcast", [&] {
    if (context_ == nullptr || data.empty()) return;
    gloo::BroadcastOptions opts(context_);
    opts.setOutput(data.data(), data.size());
    opts.setRoot(root);
    gloo::broadcast(opts);
  });
}

absl::Status GlooCommunicator::Barrier() {
  absl::Status same = VerifySameCall(4, "Barrier", 0, 0);
  if (!same.ok()) return same;
  return Guarded("Barrier", [&] {
    if (context_ == nullptr) return;
    gloo::BarrierOptions opts(context_);
    gloo::barrier(opts);
  });
}

std::string GlooCommunicator::Describe() const {
  return absl::StrCat("gloo rank ", options_.rank, "/", options_.world_size, " via ",
                      options_.iface.empty() ? options_.hostname : options_.iface);
}

}  // namespace tpserve
