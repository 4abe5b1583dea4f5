// OptimizerShard: which elements of the flat parameter buffer this rank's optimizer owns,
// plain data parallelism (everything) or ZeRO-1 (--zero 1: this rank's shard of each bucket),
// and the update of one bucket's piece of them.
//
// Where it sits in a step: at GradientReducer::finish, once the ranks have agreed that the
// step is applied (step_agreement.hpp), the optimizer runs on this rank's piece of each bucket
// (piece_after), in smaller update pieces so that rings in flight can be polled between
// them. The optimizer is elementwise, so updating by pieces gives bitwise the same parameters.
// When updates run bucket by bucket rather than once for the whole buffer: updates_per_bucket
// (gradient_reducer.hpp).
//
// ZeRO-1. Each gradient bucket's ring runs only its reduce-scatter, so rank r holds the full
// sum of chunk r of every bucket (the ring's own partition of that bucket's elements,
// schedule.hpp). Rank r updates exactly those chunks, keeps optimizer state for them alone,
// and the all-gather half of the same ring then carries the updated parameters to every rank
// (bucket_rings.hpp):
//
//   reduce-scatter(grads of bucket b) -> update(chunk r of bucket b) -> all-gather(params of b)
//
// The reduce-scatter is the first half of the allreduce's ring and the update is elementwise,
// so the parameters are bitwise those of --zero 0: same bytes on the wire, optimizer state and
// update work divided by N. The state buffers hold the chunks end to end, in bucket order:
//
//   shard elements = Σ_b chunk_size(E_b, N, r)          (about M / N)
//
// Worked example, buckets (backward order) b0 = [370, 440) and b1 = [0, 370), N = 3:
//   b0: 70 floats, chunks 24 23 23 at 370 394 417;  b1: 370 floats, chunks 124 123 123 at 0 124 247
//   rank 1 owns pieces {bucket 0, flat 394, 23 floats, shard 0} and {bucket 1, flat 124, 123
//   floats, shard 23}: 146 elements of state per state tensor instead of 440.
// Unsharded (--zero 0), piece b is all of bucket b and its shard offset is its flat offset,
// so one code path serves both.
//
// --collective hierarchical: the reduce-scatter of the two-level ring leaves rank r the
// hierarchical shard of each bucket instead of chunk r (collectives/hierarchical.hpp, "The two
// halves"; an extra rank of a larger host owns nothing), and the update sits between the same
// two halves; the pieces come from collectives::reduce_scatter_shard either way. Its halves
// are its allreduce's, so the parameters are bitwise those of hierarchical --zero 0.
//
// Checkpoints keep one layout whatever --zero and N were (training_state.hpp): gather()
// assembles the full state from every rank's shard, take() cuts a rank's shard out of it.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "ringtrain/collectives/buckets.hpp"
#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/collectives/options.hpp"
#include "ringtrain/framework/optim/optimizer.hpp"

namespace ringtrain {

struct ShardPiece {
  std::size_t flat_offset = 0;   // first element in the flat parameter buffer
  std::size_t count = 0;         // elements (0 when the bucket has fewer elements than ranks)
  std::size_t shard_offset = 0;  // first element in the optimizer's own range
};

class OptimizerShard {
 public:
  // `buckets` cover [0, total_elements) (buckets.hpp); pieces()[b] belongs to buckets[b].
  // sharded = false: this rank owns everything (piece b = bucket b at its own offset).
  // sharded: the part of each bucket that `ring`'s reduce-scatter leaves rank `rank` of N
  // (collectives::reduce_scatter_shard; kHierarchical needs ring.hierarchy, CollectiveError
  // otherwise).
  OptimizerShard(std::span<const collectives::Bucket> buckets, std::size_t total_elements, int N,
                 int rank, bool sharded, const collectives::RingOptions& ring = {});

  bool sharded() const { return sharded_; }
  const std::vector<ShardPiece>& pieces() const { return pieces_; }
  // Elements this rank's optimizer owns (total_elements() when unsharded).
  std::size_t elements() const { return elements_; }
  std::size_t total_elements() const { return total_; }

  // shard (elements()) <- this rank's pieces of full (total_elements()). Local.
  void take(std::span<const float> full, std::span<float> shard) const;
  // full (total_elements()) <- every rank's shard, on every rank: this rank's pieces are
  // placed, the ranks exchange where their pieces lie (one MPI_Allgather), then each bucket
  // is all-gathered (MPI_Allgatherv: pieces may be empty). Collective. Unsharded: a copy.
  void gather(const collectives::Communicator& comm, std::span<const float> shard,
              std::span<float> full) const;
  // The same on rank 0 only (a checkpoint's writer): each bucket's pieces are gathered to
  // rank 0 (MPI_Gatherv), so no other rank holds the full state. `full` is used on rank 0
  // only (the others may pass an empty span). Collective. Unsharded: a copy on rank 0.
  void gather_to_root(const collectives::Communicator& comm, std::span<const float> shard,
                      std::span<float> full) const;

  // Every rank's piece of each bucket, relative to the bucket's start, as MPI's v-collectives
  // want them: rank q's piece of bucket b is counts/displs[b·N + q]. Collective (one
  // MPI_Allgather).
  struct PieceTable {
    std::vector<int> counts, displs;  // (buckets, N)
  };
  PieceTable piece_table(const collectives::Communicator& comm) const;
  // Elements of rank q's shard (its pieces end to end, bucket order). Local.
  std::size_t shard_elements(const PieceTable& table, int q, int N) const;
  // full (total_elements()) <- rank q's shard (shard_elements(table, q, N)), at its pieces'
  // places: what gather() does with each rank's shard, without MPI, on any thread. Local.
  void place_rank(const PieceTable& table, int q, int N, std::span<const float> shard_q,
                  std::span<float> full) const;

 private:
  void place(std::span<const float> shard, std::span<float> full) const;  // this rank's pieces

  std::vector<collectives::Bucket> buckets_;
  std::vector<ShardPiece> pieces_;
  std::size_t total_ = 0, elements_ = 0;
  bool sharded_ = false;
};

// The piece of `mine` that follows its first `done` elements, at most piece_elements long (0
// counts as 1): the pieces an update takes in turn, so that rings in flight are polled
// between them. Its count is 0 once done >= mine.count.
ShardPiece piece_after(const ShardPiece& mine, std::size_t done, std::size_t piece_elements);

// ZeRO-1 updates the shard that a reduce-scatter leaves each rank, so with more than one rank
// it needs an algorithm that runs the two halves apart: the ring or the hierarchical one, not
// Algorithm::kMpi (UsageError).
void check_zero_algorithm(bool zero, collectives::Algorithm algorithm, int world_size);

// Bytes of optimizer state (every per-element buffer) on each rank, and what one rank would
// hold unsharded. Collective (one small allreduce).
struct OptimizerStateBytes {
  std::vector<std::size_t> per_rank;
  std::size_t unsharded = 0;
};
OptimizerStateBytes optimizer_state_bytes(const collectives::Communicator& comm,
                                          Optimizer& optimizer, const OptimizerShard& shard);

// This process's peak resident set (VmHWM of /proc/self/status) in bytes; 0 if unreadable.
std::size_t peak_rss_bytes();

}  // namespace ringtrain
