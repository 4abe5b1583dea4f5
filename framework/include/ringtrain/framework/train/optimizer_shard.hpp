// OptimizerShard: which elements of the flat parameter buffer this rank's optimizer owns,
// plain data parallelism (everything) or ZeRO-1 (--zero 1: this rank's chunk of each bucket).
//
// Where it sits: with --zero 1 each gradient bucket is only reduce-scattered, so rank r holds
// the full sum of chunk r of every bucket (the ring's own partition of that bucket's elements,
// schedule.hpp). Rank r updates exactly those chunks, keeps optimizer state for them alone,
// and the ring all-gather then carries the updated parameters (gradient_reducer.hpp). The
// state buffers hold the chunks end to end, in bucket order:
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
// Checkpoints keep one layout whatever --zero and N were (training_state.hpp): gather()
// assembles the full state from every rank's shard, take() cuts a rank's shard out of it.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "ringtrain/collectives/buckets.hpp"
#include "ringtrain/collectives/communicator.hpp"
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
  OptimizerShard(std::span<const collectives::Bucket> buckets, std::size_t total_elements, int N,
                 int rank, bool sharded);

  bool sharded() const { return sharded_; }
  const std::vector<ShardPiece>& pieces() const { return pieces_; }
  // Elements this rank's optimizer owns (total_elements() when unsharded).
  std::size_t elements() const { return elements_; }
  std::size_t total_elements() const { return total_; }

  // shard (elements()) <- this rank's pieces of full (total_elements()). Local.
  void take(std::span<const float> full, std::span<float> shard) const;
  // full (total_elements()) <- every rank's shard, on every rank: this rank's pieces are
  // placed, then each bucket is ring all-gathered. Collective. Unsharded: a copy.
  void gather(const collectives::Communicator& comm, std::span<const float> shard,
              std::span<float> full) const;

 private:
  std::vector<collectives::Bucket> buckets_;
  std::vector<ShardPiece> pieces_;
  std::size_t total_ = 0, elements_ = 0;
  bool sharded_ = false;
};

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
