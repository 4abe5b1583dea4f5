// A grid sum's words summed over ranks range by range (see grid_exchange.hpp). The rounding
// and the all-gather that follow are allreduce_grid's (grid_sum.cpp).
#include "ringtrain/collectives/grid_exchange.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "ringtrain/collectives/schedule.hpp"

namespace ringtrain::collectives {

namespace {

constexpr int kTag = 0x4758;  // every range's messages: ranges match in the order started
// Messages of 256 KiB, two received at a time.
constexpr std::size_t kSegment = 32768;

// Words [lo, hi): chunk q of the range [begin, end) over N ranks (schedule.hpp).
struct Part {
  std::size_t lo, hi;
};
Part part_of(std::size_t begin, std::size_t end, std::size_t N, std::size_t q) {
  const std::size_t lo = begin + chunk_begin(end - begin, N, q);
  return {lo, lo + chunk_size(end - begin, N, q)};
}

}  // namespace

std::size_t GridExchange::segment_size(const Incoming& in, std::size_t k) {
  return std::min(kSegment, in.hi - (in.lo + k * kSegment));
}

GridExchange::~GridExchange() {
  for (Incoming& in : incoming_) MPI_Waitall(2, in.requests, MPI_STATUSES_IGNORE);
  if (!sends_.empty()) MPI_Waitall(int(sends_.size()), sends_.data(), MPI_STATUSES_IGNORE);
}

void GridExchange::begin(const Communicator& comm, GridSum& sum) {
  if (comm_ != nullptr) wait();
  comm_ = &comm;
  sum_ = &sum;
  started_from_ = sum.blocks();
  ranges_.clear();
  sends_.clear();
  incoming_.clear();
}

void GridExchange::start_from(std::size_t first_block) {
  if (sum_ == nullptr) throw ExactSumError("grid exchange: start_from before begin");
  if (first_block >= started_from_) return;
  GridSum& sum = *sum_;
  for (std::size_t b = first_block; b < started_from_; ++b) {
    if (sum.terms_[b] == 0)
      std::fill_n(sum.words_.begin() + std::ptrdiff_t(sum.begin_[b]), sum.block_size(b), 0);
    else if (!sum.fixed(b))
      throw ExactSumError("grid exchange: block " + std::to_string(b) +
                          " keeps terms whose grid is not fixed yet; only fixed or empty "
                          "blocks can be summed over ranks early");
  }
  const std::size_t begin = sum.begin_[first_block], end = sum.begin_[started_from_];
  started_from_ = first_block;
  const std::size_t N = std::size_t(comm_->size()), r = std::size_t(comm_->rank());
  const Part mine = part_of(begin, end, N, r);
  Range range{begin, end, sends_.size(), 0, incoming_.size(), 0, false};
  for (std::size_t q = 0; q < N; ++q) {  // this rank's part from every other rank
    if (q == r || mine.hi == mine.lo) continue;
    Incoming in;
    in.source = int(q);
    in.lo = mine.lo;
    in.hi = mine.hi;
    in.segments = (mine.hi - mine.lo + kSegment - 1) / kSegment;
    incoming_.push_back(in);
    if (scratch_.size() < incoming_.size()) scratch_.emplace_back(2 * kSegment);
    for (int k = 0; k < 2; ++k) post(incoming_.size() - 1);
  }
  for (std::size_t q = 0; q < N; ++q) {  // every other rank's part, all at once
    const Part theirs = part_of(begin, end, N, q);
    if (q == r) continue;
    for (std::size_t at = theirs.lo; at < theirs.hi; at += kSegment) {
      sends_.push_back(MPI_REQUEST_NULL);
      check_mpi(MPI_Isend(sum.words_.data() + at, int(std::min(kSegment, theirs.hi - at)),
                          MPI_INT64_T, int(q), kTag, comm_->handle(), &sends_.back()),
                "MPI_Isend(grid exchange)");
    }
  }
  range.sends = sends_.size() - range.first_send;
  range.incomings = incoming_.size() - range.first_incoming;
  ranges_.push_back(range);
}

// The incoming part's next segment, into the scratch slot its segment number names.
void GridExchange::post(std::size_t incoming) {
  Incoming& in = incoming_[incoming];
  if (in.next_post == in.segments) return;
  const std::size_t k = in.next_post++;
  check_mpi(MPI_Irecv(scratch_[incoming].data() + (k % 2) * kSegment, int(segment_size(in, k)),
                      MPI_INT64_T, in.source, kTag, comm_->handle(), &in.requests[k % 2]),
            "MPI_Irecv(grid exchange)");
}

// words += each arrived segment, as unsigned integers: the same sum wherever it is exact
// (|sum| <= 2^51), and defined where a term beyond its bound broke the words' limit (the
// agreement then refuses the sum).
bool GridExchange::advance(std::size_t incoming, bool block) {
  Incoming& in = incoming_[incoming];
  while (in.next_add < in.segments) {
    const std::size_t k = in.next_add;
    int flag = 1;
    if (block)
      check_mpi(MPI_Wait(&in.requests[k % 2], MPI_STATUS_IGNORE), "MPI_Wait(grid exchange)");
    else
      check_mpi(MPI_Test(&in.requests[k % 2], &flag, MPI_STATUS_IGNORE), "MPI_Test(grid exchange)");
    if (!flag) return false;
    std::int64_t* words = sum_->words_.data() + in.lo + k * kSegment;
    const std::int64_t* got = scratch_[incoming].data() + (k % 2) * kSegment;
    for (std::size_t i = 0; i < segment_size(in, k); ++i)
      words[i] = std::int64_t(std::uint64_t(words[i]) + std::uint64_t(got[i]));
    ++in.next_add;
    post(incoming);
  }
  return true;
}

bool GridExchange::advance(Range& range, bool block) {
  if (range.done) return true;
  bool done = true;
  for (std::size_t i = 0; i < range.incomings; ++i)
    done &= advance(range.first_incoming + i, block);
  MPI_Request* sends = sends_.data() + range.first_send;
  int flag = 1;
  if (block)
    check_mpi(MPI_Waitall(int(range.sends), sends, MPI_STATUSES_IGNORE), "MPI_Waitall(grid)");
  else
    check_mpi(MPI_Testall(int(range.sends), sends, &flag, MPI_STATUSES_IGNORE),
              "MPI_Testall(grid)");
  range.done = done && flag;
  return range.done;
}

bool GridExchange::progress() {
  bool all = true;
  for (Range& range : ranges_) all &= advance(range, false);
  return all;
}

void GridExchange::wait() {
  for (Range& range : ranges_) advance(range, true);
}

}  // namespace ringtrain::collectives
