// ShmAllToAll without shared memory: every rank's plan runs in lock step over in-memory slots,
// one step at a time (fill every slot, then read every slot), as ShmCommunicator runs them.
#include "comm/shm_all_to_all.h"

#include <cstdint>
#include <string>
#include <vector>

#include "comm/comm_test_util.h"
#include "gtest/gtest.h"

namespace tpserve {
namespace {

constexpr uint8_t kSlotJunk = 0xAB;  // what a slot holds before Fill (stale bytes)

struct Simulated {
  std::vector<absl::Status> status;       // [rank]: the first error, if any
  std::vector<std::vector<uint8_t>> out;  // [rank]: output then guard bytes
  int steps = 0;
};

// `expects[q][p]`: elements rank q expects from rank p; nullptr: sends[p][q].
Simulated Simulate(const AllToAllCounts& sends, size_t elem_bytes, size_t slot_bytes,
                   const AllToAllCounts* expects = nullptr) {
  const int world = static_cast<int>(sends.size());
  Simulated sim;
  sim.status.resize(world);
  std::vector<ShmAllToAll> plans;
  std::vector<std::vector<uint8_t>> in(world), slots(world);
  std::vector<const uint8_t*> slot_data(world);
  for (int rank = 0; rank < world; ++rank) {
    std::vector<int64_t> recv_counts(world);
    int64_t received = 0;
    for (int from = 0; from < world; ++from) {
      recv_counts[from] = expects != nullptr ? (*expects)[rank][from] : sends[from][rank];
      received += recv_counts[from];
    }
    plans.emplace_back(world, rank, sends[rank], recv_counts, elem_bytes);
    in[rank] = AllToAllInput(sends, rank, elem_bytes);
    sim.out.emplace_back(received * elem_bytes + kAllToAllGuardBytes, kAllToAllPoison);
    slots[rank].resize(slot_bytes);
    slot_data[rank] = slots[rank].data();
  }
  for (size_t window = 0; !plans[0].Done(window); window += slot_bytes) {
    for (int rank = 0; rank < world; ++rank) {
      EXPECT_FALSE(plans[rank].Done(window)) << "ranks disagree on the steps: rank " << rank;
      slots[rank].assign(slot_bytes, kSlotJunk);
      plans[rank].Fill(in[rank].data(), window, slot_bytes, slots[rank].data());
    }
    ++sim.steps;
    bool failed = false;
    for (int rank = 0; rank < world; ++rank) {
      sim.status[rank] = plans[rank].Read(slot_data.data(), window, slot_bytes, in[rank].data(),
                                          sim.out[rank].data());
      failed |= !sim.status[rank].ok();
    }
    if (failed) break;
  }
  for (int rank = 1; rank < world; ++rank) {
    EXPECT_EQ(plans[rank].Done(sim.steps * slot_bytes), plans[0].Done(sim.steps * slot_bytes));
  }
  return sim;
}

// Counts of every size class: zero pairs, a rank's own piece, pieces longer than a slot.
AllToAllCounts Counts(int world) {
  AllToAllCounts counts(world, std::vector<int64_t>(world));
  for (int p = 0; p < world; ++p) {
    for (int q = 0; q < world; ++q) {
      counts[p][q] = (p * 7 + q * 13) % 5 == 1 ? 0 : 3 + 9 * p + 5 * q;
    }
  }
  return counts;
}

TEST(ShmAllToAll, EveryRankGetsItsPiecesAtTheirOffsetsWhateverTheSlotSize) {
  // From 5 ranks on the counts rows alone (16 bytes per rank) fill more than a 64-byte slot.
  for (int world = 1; world <= 6; ++world) {
    for (size_t slot_bytes : {size_t{64}, size_t{100}, size_t{128}, size_t{4096}}) {
      for (size_t elem_bytes : {size_t{1}, size_t{2}, size_t{4}}) {
        SCOPED_TRACE(testing::Message()
                     << "world " << world << " slot " << slot_bytes << " elem " << elem_bytes);
        const AllToAllCounts counts = Counts(world);
        Simulated sim = Simulate(counts, elem_bytes, slot_bytes);
        for (int rank = 0; rank < world; ++rank) {
          ASSERT_TRUE(sim.status[rank].ok()) << sim.status[rank];
          EXPECT_EQ(sim.out[rank], ExpectedAllToAll(counts, rank, elem_bytes)) << rank;
        }
      }
    }
  }
}

// Each stream is its counts row (16 bytes per rank) and the pieces for the other ranks.
TEST(ShmAllToAll, StepsAreTheLongestStreamInSlots) {
  // Rank 0's stream: 32 + 20 * 4 = 112 bytes (its own 3 elements stay out), rank 1's 40.
  EXPECT_EQ(Simulate({{3, 20}, {2, 0}}, 4, 64).steps, 2);
  EXPECT_EQ(Simulate({{3, 20}, {2, 0}}, 4, 112).steps, 1);
  EXPECT_EQ(Simulate({{300, 0}, {0, 300}}, 4, 64).steps, 1);  // own pieces only
  // 5 ranks: the rows alone (80 bytes) take two 64-byte steps.
  const AllToAllCounts zeros(5, std::vector<int64_t>(5, 0));
  Simulated sim = Simulate(zeros, 2, 64);
  EXPECT_EQ(sim.steps, 2);
  for (int rank = 0; rank < 5; ++rank) {
    EXPECT_EQ(sim.out[rank], ExpectedAllToAll(zeros, rank, 2));
  }
}

TEST(ShmAllToAll, CountsThatDoNotPairUpFailOnEveryRankOnceTheRowsAreIn) {
  constexpr int kWorld = 5;  // rows of 80 bytes: two 64-byte steps
  const AllToAllCounts sends = Counts(kWorld);
  AllToAllCounts expects(kWorld, std::vector<int64_t>(kWorld));
  for (int q = 0; q < kWorld; ++q) {
    for (int p = 0; p < kWorld; ++p) expects[q][p] = sends[p][q];
  }
  expects[3][2] += 1;  // rank 3 expects one element more from rank 2 than it sends
  Simulated sim = Simulate(sends, 4, 64, &expects);
  EXPECT_EQ(sim.steps, 2);  // the step that completes the rows, with 64-byte slots
  for (int rank = 0; rank < kWorld; ++rank) {
    EXPECT_EQ(sim.status[rank].code(), absl::StatusCode::kInvalidArgument) << rank;
    EXPECT_EQ(sim.status[rank].message(), "rank 2 sends " + std::to_string(sends[2][3]) +
                                              " elements to rank 3, which expects " +
                                              std::to_string(sends[2][3] + 1));
    EXPECT_EQ(sim.out[rank], std::vector<uint8_t>(sim.out[rank].size(), kAllToAllPoison))
        << "rank " << rank << " wrote its output before the counts were checked";
  }
}

}  // namespace
}  // namespace tpserve
