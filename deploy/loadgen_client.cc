#include "deploy/loadgen_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/grpc_status.h"
#include "proto/tpserve.grpc.pb.h"

namespace tpserve {
namespace {

namespace pb = ::tpserve::v1;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

absl::Status CheckOptions(const LoadOptions& o) {
  if (o.concurrency < 1 || o.concurrency > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("--concurrency = ", o.concurrency, " must be in [1, 4096]"));
  }
  if (o.max_requests < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--requests = ", o.max_requests, " must be >= 0"));
  }
  if (o.duration < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--duration_s must be >= 0");
  }
  if (o.max_requests == 0 && o.duration == absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "--requests = 0 and --duration_s = 0: give at least one limit");
  }
  if (!(o.rate >= 0) || !std::isfinite(o.rate)) {
    return absl::InvalidArgumentError(absl::StrCat("--rate = ", o.rate, " must be >= 0"));
  }
  if (!(o.temperature >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--temperature = ", o.temperature, " must be >= 0"));
  }
  if (o.prompt_mix.buckets.empty() || o.output_mix.buckets.empty()) {
    return absl::InvalidArgumentError("the prompt and output length mixes must not be empty");
  }
  if (o.warmup_requests < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--warmup_requests = ", o.warmup_requests, " must be >= 0"));
  }
  return absl::OkStatus();
}

std::shared_ptr<grpc::Channel> NewChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // one connection per stream
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

pb::GenerateRequest ToProto(const WorkloadRequest& w, const LoadOptions& o) {
  pb::GenerateRequest req;
  req.set_text(w.prompt);
  req.mutable_sampling()->set_temperature(o.temperature);
  req.mutable_sampling()->set_seed(o.seed + static_cast<uint64_t>(w.index));
  req.set_max_new_tokens(w.output_tokens);
  req.set_ignore_eos(o.ignore_eos);
  req.set_request_id(absl::StrCat("loadgen-", w.index));
  return req;
}

// Sends one request and reads its stream to the end.
RequestRecord RunOne(pb::TpServe::Stub& stub, const WorkloadRequest& w, const LoadOptions& o) {
  RequestRecord rec;
  rec.index = w.index;
  rec.wanted_prompt_tokens = w.prompt_tokens;
  rec.wanted_output_tokens = w.output_tokens;
  const pb::GenerateRequest req = ToProto(w, o);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + absl::ToChronoSeconds(o.request_timeout));
  const Clock::time_point sent = Clock::now();
  std::unique_ptr<grpc::ClientReader<pb::GenerateResponse>> reader = stub.Generate(&ctx, req);
  pb::GenerateResponse m;
  while (reader->Read(&m)) {
    RecordMessage(Seconds(Clock::now() - sent), m.token_ids_size(), &rec);
    if (m.has_usage()) rec.prompt_tokens = m.usage().prompt_tokens();
  }
  const absl::Status status = FromGrpcStatus(reader->Finish());
  rec.e2e_s = Seconds(Clock::now() - sent);
  if (!status.ok()) {
    rec.status = absl::StatusCodeToString(status.code());
    rec.error_message = std::string(status.message());
  }
  return rec;
}

// Hands out the workload's requests in order with their arrival times, until a limit is hit.
class Dispatcher {
 public:
  Dispatcher(const LoadOptions& o, Clock::time_point start)
      : options_(o), start_(start), workload_(o.prompt_mix, o.output_mix, o.rate, o.seed) {}

  // The next request and its arrival offset from the start; nullopt once the run is over.
  std::optional<std::pair<WorkloadRequest, double>> Take() {
    absl::MutexLock lock(&mu_);
    if (done_ || (options_.max_requests > 0 && issued_ >= options_.max_requests)) {
      return std::nullopt;
    }
    const double limit_s = absl::ToDoubleSeconds(options_.duration);
    WorkloadRequest w = workload_.Next();
    arrival_s_ += w.arrival_gap_s;
    if (limit_s > 0 && std::max(arrival_s_, Seconds(Clock::now() - start_)) >= limit_s) {
      done_ = true;  // no more, for any stream
      return std::nullopt;
    }
    ++issued_;
    return std::make_pair(std::move(w), arrival_s_);
  }

 private:
  const LoadOptions& options_;
  const Clock::time_point start_;
  absl::Mutex mu_;
  Workload workload_ ABSL_GUARDED_BY(mu_);
  int64_t issued_ ABSL_GUARDED_BY(mu_) = 0;
  double arrival_s_ ABSL_GUARDED_BY(mu_) = 0.0;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

absl::Status WarmUp(pb::TpServe::Stub& stub, const LoadOptions& o) {
  LengthMix prompt{{{16, 1.0}}}, output{{{8, 1.0}}};
  Workload warm(prompt, output, 0.0, o.seed ^ 0x5EEDull);
  for (int i = 0; i < o.warmup_requests; ++i) {
    RequestRecord r = RunOne(stub, warm.Next(), o);
    if (!r.ok()) {
      return absl::UnavailableError(absl::StrCat("warm-up request to ", o.address,
                                                 " failed: ", r.status, ": ", r.error_message));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LoadResult> RunLoad(const LoadOptions& options) {
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  std::vector<std::unique_ptr<pb::TpServe::Stub>> stubs;
  for (int i = 0; i < options.concurrency; ++i) {
    std::shared_ptr<grpc::Channel> channel = NewChannel(options.address);
    // Connect now so that no request's TTFT includes the TCP and HTTP/2 set-up.
    if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
      return absl::UnavailableError(
          absl::StrCat("cannot connect to ", options.address, " in 10 s"));
    }
    stubs.push_back(pb::TpServe::NewStub(channel));
  }
  if (absl::Status s = WarmUp(*stubs[0], options); !s.ok()) return s;

  const Clock::time_point start = Clock::now();
  Dispatcher dispatcher(options, start);
  absl::Mutex mu;
  std::vector<RequestRecord> records;
  std::vector<std::thread> streams;
  for (int i = 0; i < options.concurrency; ++i) {
    streams.emplace_back([&, stub = stubs[i].get()] {
      while (auto next = dispatcher.Take()) {
        std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                                  std::chrono::duration<double>(next->second)));
        const double send_s = Seconds(Clock::now() - start);
        RequestRecord rec = RunOne(*stub, next->first, options);
        rec.send_s = send_s;
        absl::MutexLock lock(&mu);
        records.push_back(std::move(rec));
      }
    });
  }
  for (std::thread& t : streams) t.join();

  LoadResult result;
  std::sort(records.begin(), records.end(),
            [](const RequestRecord& a, const RequestRecord& b) { return a.index < b.index; });
  double first_send = std::numeric_limits<double>::infinity(), last_end = 0.0;
  for (const RequestRecord& r : records) {
    first_send = std::min(first_send, r.send_s);
    last_end = std::max(last_end, r.send_s + r.e2e_s);
  }
  result.window_s = records.empty() ? 0.0 : last_end - first_send;
  result.records = std::move(records);
  return result;
}

}  // namespace tpserve
