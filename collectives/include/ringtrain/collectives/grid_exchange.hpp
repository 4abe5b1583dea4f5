// GridExchange: the words of a GridSum (grid_sum.hpp) summed over ranks range by range, each
// range started as soon as its blocks hold all their terms, while the caller goes on adding
// terms to the blocks before it.
//
// Where it sits: the exact step's backward (framework/train/sum/exact_step.hpp) finishes the
// layers from the last to the first, and so the blocks from the end of the buffer towards its
// start. Once a layer's blocks are complete, start_from(its first block) sends their words on
// their way while backward runs on the layers before it; progress() between pieces of work
// moves them (MPI moves data only inside MPI calls); round_exchanged_grid() at the end
// starts what is left, waits, and rounds and all-gathers as allreduce_grid does.
//
// Vocabulary
//   range   blocks [first, end) started together: every block from `first` up to the
//           blocks started before it (the ranges tile a suffix of the buffer)
//   part    chunk q of a range's L words (schedule.hpp's partition of L over N): the words
//           rank q sums, rounds and all-gathers
//   segment 32,768 words (256 KiB) of a part, one message
// For a range, rank r sends its words of every other rank q's part to q, all segments at
// once, and receives every other rank's words of part r, two segments at a time, adding each
// to its own words as it arrives (in cache). Every rank sends (N − 1)/N of the range's words,
// as many as the ring's reduce-scatter; the N − 1 other ranks' words come at once, where
// the ring takes N − 1 rounds, each waiting for the one before.
// Worked example, N = 2, 16 words: the last layer's range [6, 16) starts first, then [0, 6).
// Parts: [6, 11) and [0, 3) are rank 0's, [11, 16) and [3, 6) rank 1's. Rank 0 sends its
// words [11, 16), later [3, 6), to rank 1, and adds rank 1's [6, 11), later [0, 3), to its
// own; rank 1 the other way round.
//
// The bits: integer addition is exact and associative, so part r's words hold the same sums
// as allreduce_grid's ring gives; each element is rounded once on its block's grid, by
// the rank that owns it, and the floats are all-gathered range by range (the ring,
// ring.hpp). Which rank rounds an element does not change its bits: the same result, bit for
// bit, as allreduce_grid, for any ranges and any N.
//
// Checks: a started block must hold all its terms on this rank and be fixed (its words are
// final) or hold none (its words are zeros): ExactSumError otherwise. The agreement of
// allreduce_grid (same blocks, same fixed grids, term counts, bounds, finite terms) runs in
// round_exchanged_grid after the words moved: a sum it refuses is refused on every rank, as
// before, its words never used. Memory: two segments of 256 KiB per other rank and range.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/collectives/grid_sum.hpp"

namespace ringtrain::collectives {

class GridExchange {
 public:
  GridExchange() = default;
  // Unfinished ranges are completed (blocking): no MPI request outlives its buffers.
  ~GridExchange();
  GridExchange(const GridExchange&) = delete;
  GridExchange& operator=(const GridExchange&) = delete;

  // A new exchange of `sum`'s words over `comm` (both outlive it): nothing started. Waits for
  // a previous exchange's ranges first.
  void begin(const Communicator& comm, GridSum& sum);
  // Starts the blocks [first_block, started_from()): see "Checks" above. Nothing if
  // first_block >= started_from(). Collective: every rank starts the same ranges in the same
  // order.
  void start_from(std::size_t first_block);
  // The first block started so far (sum.blocks() before any start).
  std::size_t started_from() const { return started_from_; }
  // Advances every range in flight without blocking; true once all started ranges are done.
  bool progress();
  // Blocks until every started range is done.
  void wait();
  // The started ranges, as words [begin, end) of the sum, in the order started.
  std::size_t ranges() const { return ranges_.size(); }
  std::pair<std::size_t, std::size_t> range(std::size_t i) const {
    return {ranges_[i].begin, ranges_[i].end};
  }

 private:
  // One other rank's part of a range, received segment by segment into two slots of
  // scratch and added to this rank's words as each arrives (in cache).
  struct Incoming {
    int source = 0;
    std::size_t lo = 0, hi = 0;  // words [lo, hi): this rank's part of the range
    std::size_t segments = 0, next_post = 0, next_add = 0;
    MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  };
  struct Range {
    std::size_t begin = 0, end = 0;                 // its words
    std::size_t first_send = 0, sends = 0;          // in sends_
    std::size_t first_incoming = 0, incomings = 0;  // in incoming_
    bool done = false;
  };
  static std::size_t segment_size(const Incoming& in, std::size_t k);  // segment k's words
  void post(std::size_t incoming);
  // Adds what arrived of one other rank's part (blocking: all of it); true once complete.
  bool advance(std::size_t incoming, bool block);
  bool advance(Range& range, bool block);

  const Communicator* comm_ = nullptr;
  GridSum* sum_ = nullptr;
  std::size_t started_from_ = 0;
  std::vector<Range> ranges_;
  std::vector<MPI_Request> sends_;
  std::vector<Incoming> incoming_;
  std::vector<std::vector<std::int64_t>> scratch_;  // per incoming: two segments (kept)
};

// out <- the sum over ranks of every rank's terms, rounded to float32 once: allreduce_grid's
// result and checks, bit for bit, for a sum whose words `exchange` moves. Starts the blocks
// not started yet, waits for all, then agrees, rounds this rank's part of each range and
// all-gathers each range's floats. Collective.
bool round_exchanged_grid(const Communicator& comm, GridSum& sum, GridExchange& exchange,
                          std::span<float> out);

}  // namespace ringtrain::collectives
