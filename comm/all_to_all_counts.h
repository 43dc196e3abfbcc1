// The bookkeeping of an all-to-all's per-peer counts (Communicator::AllToAll), shared by the
// communicators that move them: where each peer's piece lies in a buffer, and the check that
// every rank's counts pair up once the ranks have exchanged them.
//
//   std::vector<int64_t> table = ...;  // AllToAllCountsRow of rank 0, then of rank 1, ...
//   TP_RETURN_IF_ERROR(CheckAllToAllPairs(world_size, table));  // the same verdict on every rank
//
// The shm communicator sends each rank's row ahead of its data; Gloo, with verify_collectives,
// all-gathers the rows first; in-process checks its calls' rows directly. NCCL sends no counts.
// Threading: pure functions.
#ifndef TPSERVE_COMM_ALL_TO_ALL_COUNTS_H_
#define TPSERVE_COMM_ALL_TO_ALL_COUNTS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace tpserve {

// One rank's row of the counts table: its send_counts, then its recv_counts (2 * world_size
// entries).
std::vector<int64_t> AllToAllCountsRow(absl::Span<const int64_t> send_counts,
                                       absl::Span<const int64_t> recv_counts);

// OK when rank p's send_counts[q] equals rank q's recv_counts[p] for every pair (p = q too);
// otherwise INVALID_ARGUMENT naming the first pair, senders then receivers in rank order:
// "rank 1 sends 5 elements to rank 0, which expects 3". `table` holds every rank's
// AllToAllCountsRow in rank order.
// REQUIRES: table.size() == 2 * world_size * world_size.
absl::Status CheckAllToAllPairs(int world_size, absl::Span<const int64_t> table);

// Byte offset of each peer's piece in a buffer that holds counts[0] elements of `elem_bytes`,
// then counts[1], ...; one entry more at the end: the buffer's size.
std::vector<size_t> AllToAllByteOffsets(absl::Span<const int64_t> counts, size_t elem_bytes);

}  // namespace tpserve

#endif  // TPSERVE_COMM_ALL_TO_ALL_COUNTS_H_
