#include "comm/shm_all_to_all.h"

#include <algorithm>
#include <cstring>

#include "comm/all_to_all_counts.h"

namespace tpserve {
namespace {

// A stream's bytes [begin, begin + bytes), held at `range`, meet a slot that holds the stream's
// bytes [window, window + window_bytes): copy the common part one way or the other.
void RangeToWindow(const uint8_t* range, size_t begin, size_t bytes, size_t window,
                   size_t window_bytes, uint8_t* slot) {
  const size_t lo = std::max(begin, window);
  const size_t hi = std::min(begin + bytes, window + window_bytes);
  if (lo < hi) std::memcpy(slot + (lo - window), range + (lo - begin), hi - lo);
}

void WindowToRange(const uint8_t* slot, size_t window, size_t window_bytes, size_t begin,
                   size_t bytes, uint8_t* range) {
  const size_t lo = std::max(begin, window);
  const size_t hi = std::min(begin + bytes, window + window_bytes);
  if (lo < hi) std::memcpy(range + (lo - begin), slot + (lo - window), hi - lo);
}

// Where rank `from`'s piece for each rank starts in from's stream (its own piece is not
// there), given its send counts; the last entry is the stream's length.
std::vector<size_t> StreamOffsets(int from, absl::Span<const int64_t> send_counts,
                                  size_t elem_bytes, size_t row_bytes) {
  std::vector<size_t> begin(send_counts.size() + 1);
  size_t at = row_bytes;
  for (size_t q = 0; q < send_counts.size(); ++q) {
    begin[q] = at;
    if (static_cast<int>(q) != from) at += static_cast<size_t>(send_counts[q]) * elem_bytes;
  }
  begin.back() = at;
  return begin;
}

}  // namespace

ShmAllToAll::ShmAllToAll(int world_size, int rank, absl::Span<const int64_t> send_counts,
                         absl::Span<const int64_t> recv_counts, size_t elem_bytes)
    : world_size_(world_size),
      rank_(rank),
      elem_bytes_(elem_bytes),
      row_bytes_(2 * static_cast<size_t>(world_size) * sizeof(int64_t)),
      table_(2 * static_cast<size_t>(world_size) * world_size, 0),
      in_offsets_(AllToAllByteOffsets(send_counts, elem_bytes)),
      out_offsets_(AllToAllByteOffsets(recv_counts, elem_bytes)),
      send_begin_(StreamOffsets(rank, send_counts, elem_bytes, row_bytes_)) {
  const std::vector<int64_t> row = AllToAllCountsRow(send_counts, recv_counts);
  std::memcpy(RowOf(rank), row.data(), row_bytes_);
}

uint8_t* ShmAllToAll::RowOf(int rank) {
  return reinterpret_cast<uint8_t*>(table_.data() + 2 * static_cast<size_t>(world_size_) * rank);
}

bool ShmAllToAll::Done(size_t window) const { return rows_in_ && window >= longest_stream_; }

void ShmAllToAll::Fill(const uint8_t* in, size_t window, size_t slot_bytes, uint8_t* slot) const {
  const auto* row = reinterpret_cast<const uint8_t*>(table_.data() + 2 * world_size_ * rank_);
  RangeToWindow(row, 0, row_bytes_, window, slot_bytes, slot);
  for (int q = 0; q < world_size_; ++q) {
    if (q == rank_) continue;
    RangeToWindow(in + in_offsets_[q], send_begin_[q], in_offsets_[q + 1] - in_offsets_[q], window,
                  slot_bytes, slot);
  }
}

void ShmAllToAll::PlanReads() {
  recv_begin_.assign(world_size_, 0);
  longest_stream_ = 0;
  for (int p = 0; p < world_size_; ++p) {
    const auto send_counts =
        absl::MakeConstSpan(table_).subspan(2 * static_cast<size_t>(world_size_) * p, world_size_);
    const std::vector<size_t> begin = StreamOffsets(p, send_counts, elem_bytes_, row_bytes_);
    recv_begin_[p] = begin[rank_];
    longest_stream_ = std::max(longest_stream_, begin.back());
  }
  rows_in_ = true;
}

absl::Status ShmAllToAll::Read(const uint8_t* const* slots, size_t window, size_t slot_bytes,
                               const uint8_t* in, uint8_t* out) {
  if (!rows_in_) {
    for (int p = 0; p < world_size_; ++p) {
      if (p != rank_) WindowToRange(slots[p], window, slot_bytes, 0, row_bytes_, RowOf(p));
    }
    if (window + slot_bytes < row_bytes_) return absl::OkStatus();  // rows still arriving
    absl::Status pairs = CheckAllToAllPairs(world_size_, table_);
    if (!pairs.ok()) return pairs;
    PlanReads();
    const size_t own_bytes = out_offsets_[rank_ + 1] - out_offsets_[rank_];
    if (own_bytes > 0) std::memcpy(out + out_offsets_[rank_], in + in_offsets_[rank_], own_bytes);
  }
  for (int p = 0; p < world_size_; ++p) {
    if (p == rank_) continue;
    WindowToRange(slots[p], window, slot_bytes, recv_begin_[p],
                  out_offsets_[p + 1] - out_offsets_[p], out + out_offsets_[p]);
  }
  return absl::OkStatus();
}

}  // namespace tpserve
