#include "worker/testing/in_process_communicator.h"

#include <algorithm>
#include <cstring>

namespace tpserve {

class InProcessGroup::Rank final : public Communicator {
 public:
  Rank(InProcessGroup* group, int rank) : group_(group), rank_(rank) {}

  int rank() const override { return rank_; }
  int world_size() const override { return group_->world_size_; }

  absl::Status AllReduceSum(absl::Span<float> data) override {
    Publish(data);
    std::vector<float> sum(data.size(), 0.0f);
    for (const std::vector<float>& slot : group_->slots_) {
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += slot[i];
    }
    group_->barrier_.arrive_and_wait();  // everyone has read every slot
    std::copy(sum.begin(), sum.end(), data.begin());
    return absl::OkStatus();
  }

  absl::Status AllGather(absl::Span<const float> in, absl::Span<float> out) override {
    if (out.size() != in.size() * group_->world_size_) {
      return absl::InvalidArgumentError("AllGather: out must hold world_size * in.size()");
    }
    Publish(in);
    for (int r = 0; r < group_->world_size_; ++r) {
      std::copy(group_->slots_[r].begin(), group_->slots_[r].end(), out.begin() + r * in.size());
    }
    group_->barrier_.arrive_and_wait();
    return absl::OkStatus();
  }

  absl::Status Broadcast(absl::Span<uint8_t> data, int root) override {
    std::vector<float> as_floats((data.size() + 3) / 4, 0.0f);
    std::memcpy(as_floats.data(), data.data(), data.size());
    Publish(as_floats);
    std::memcpy(data.data(), group_->slots_[root].data(), data.size());
    group_->barrier_.arrive_and_wait();
    return absl::OkStatus();
  }

  absl::Status Barrier() override {
    group_->barrier_.arrive_and_wait();
    return absl::OkStatus();
  }

 private:
  // Copies this rank's contribution into its slot and waits until every rank has done so.
  void Publish(absl::Span<const float> data) {
    group_->slots_[rank_].assign(data.begin(), data.end());
    group_->barrier_.arrive_and_wait();
  }

  InProcessGroup* group_;
  int rank_;
};

InProcessGroup::InProcessGroup(int world_size)
    : world_size_(world_size), barrier_(world_size), slots_(world_size) {
  for (int r = 0; r < world_size; ++r) ranks_.push_back(std::make_unique<Rank>(this, r));
}

InProcessGroup::~InProcessGroup() = default;

Communicator& InProcessGroup::rank(int r) { return *ranks_[r]; }

}  // namespace tpserve
