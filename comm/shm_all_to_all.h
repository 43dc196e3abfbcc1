// ShmCommunicator's all-to-all as byte streams through its slots, apart from the shared memory
// so it can be tested alone (shm_communicator.h has the slot protocol around it).
//
// Each rank's stream: its counts row (AllToAllCountsRow, 16 * world_size bytes), then its
// pieces for the other ranks in rank order; its own piece stays out (Read copies it from `in`
// to `out`). The step at stream offset `window` carries bytes [window, window + slot_bytes) of
// every rank's stream, a short or empty slot where a stream has ended. The rows come first, so
// a rank has a peer's whole row, hence where its piece lies in that peer's stream, by the step
// that brings the piece. Every rank has all rows after the same step: there each one checks
// that the counts pair up (CheckAllToAllPairs) and learns the longest stream, the number of
// steps, so the ranks agree on both with no extra step and no counts sent apart.
//
//   ShmAllToAll plan(world_size, rank, send_counts, recv_counts, elem_bytes);
//   for (size_t window = 0; !plan.Done(window); window += slot_bytes) {
//     plan.Fill(in, window, slot_bytes, my_slot);  // then publish, wait for every rank
//     TP_RETURN_IF_ERROR(plan.Read(slots, window, slot_bytes, in, out));
//   }
// Threading: one rank's plan for one call, used by one thread.
#ifndef TPSERVE_COMM_SHM_ALL_TO_ALL_H_
#define TPSERVE_COMM_SHM_ALL_TO_ALL_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace tpserve {

class ShmAllToAll {
 public:
  // REQUIRES: CheckAllToAllCounts(world_size, send_counts, recv_counts, dtype) is OK and
  // elem_bytes is BlockBytes(dtype).
  ShmAllToAll(int world_size, int rank, absl::Span<const int64_t> send_counts,
              absl::Span<const int64_t> recv_counts, size_t elem_bytes);

  // True once `window`, the stream offset of the next step, is past the end of every rank's
  // stream; false while some rows have not arrived.
  bool Done(size_t window) const;
  // Copies this rank's stream bytes [window, window + slot_bytes) to `slot`.
  void Fill(const uint8_t* in, size_t window, size_t slot_bytes, uint8_t* slot) const;
  // Takes every rank's stream bytes [window, window + slot_bytes) from slots[r] (rank order):
  // rows into the counts table, the pieces for this rank into `out`. In the step that completes
  // the table: INVALID_ARGUMENT from CheckAllToAllPairs with `out` untouched, or this rank's own
  // piece copied from `in`.
  absl::Status Read(const uint8_t* const* slots, size_t window, size_t slot_bytes,
                    const uint8_t* in, uint8_t* out);

  // Bytes of one counts row.
  size_t row_bytes() const { return row_bytes_; }

 private:
  uint8_t* RowOf(int rank);
  // Where each rank's piece for this one lies in its stream, and the longest stream.
  void PlanReads();

  const int world_size_;
  const int rank_;
  const size_t elem_bytes_;
  const size_t row_bytes_;
  std::vector<int64_t> table_;      // every rank's counts row, [rank * 2 * world_size_ ...]
  std::vector<size_t> in_offsets_;  // this rank's pieces in `in` (AllToAllByteOffsets)
  std::vector<size_t> out_offsets_;
  std::vector<size_t> send_begin_;  // [q]: where this rank's piece for q starts in its stream
  std::vector<size_t> recv_begin_;  // [p]: where p's piece for this rank starts in p's stream
  size_t longest_stream_ = 0;
  bool rows_in_ = false;
};

}  // namespace tpserve

#endif  // TPSERVE_COMM_SHM_ALL_TO_ALL_H_
