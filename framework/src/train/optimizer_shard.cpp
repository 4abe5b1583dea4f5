// The optimizer's shard of the flat buffer, and the update of a piece of it (see
// optimizer_shard.hpp).
#include "ringtrain/framework/train/optimizer_shard.hpp"

#include <fmt/format.h>

#include <mpi.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "ringtrain/collectives/ring.hpp"
#include "ringtrain/framework/error.hpp"

namespace ringtrain {

OptimizerShard::OptimizerShard(std::span<const collectives::Bucket> buckets,
                               std::size_t total_elements, int N, int rank, bool sharded)
    : buckets_(buckets.begin(), buckets.end()), total_(total_elements), sharded_(sharded) {
  const auto n = static_cast<std::size_t>(N), r = static_cast<std::size_t>(rank);
  for (const collectives::Bucket& b : buckets_) {
    ShardPiece p{b.offset, b.elements, b.offset};
    if (sharded_) {
      p = {b.offset + collectives::chunk_begin(b.elements, n, r),
           collectives::chunk_size(b.elements, n, r), elements_};
      elements_ += p.count;
    }
    pieces_.push_back(p);
  }
  if (!sharded_) elements_ = total_;
}

void OptimizerShard::take(std::span<const float> full, std::span<float> shard) const {
  if (full.size() != total_ || shard.size() != elements_)
    throw Error(fmt::format("OptimizerShard::take: got {} and {} elements, expected {} and {}",
                            full.size(), shard.size(), total_, elements_));
  for (const ShardPiece& p : pieces_)
    std::copy_n(full.begin() + std::ptrdiff_t(p.flat_offset), p.count,
                shard.begin() + std::ptrdiff_t(p.shard_offset));
}

void OptimizerShard::gather(const collectives::Communicator& comm, std::span<const float> shard,
                            std::span<float> full) const {
  if (full.size() != total_ || shard.size() != elements_)
    throw Error(fmt::format("OptimizerShard::gather: got {} and {} elements, expected {} and {}",
                            shard.size(), full.size(), elements_, total_));
  for (const ShardPiece& p : pieces_)
    std::copy_n(shard.begin() + std::ptrdiff_t(p.shard_offset), p.count,
                full.begin() + std::ptrdiff_t(p.flat_offset));
  if (!sharded_) return;
  for (const collectives::Bucket& b : buckets_)
    collectives::all_gather(comm, full.subspan(b.offset, b.elements));
}

void OptimizerShard::gather_to_root(const collectives::Communicator& comm,
                                    std::span<const float> shard, std::span<float> full) const {
  const bool root = comm.rank() == 0;
  if (shard.size() != elements_ || (root && full.size() != total_))
    throw Error(fmt::format("OptimizerShard::gather_to_root: got {} and {} elements, expected {} "
                            "and {}", shard.size(), full.size(), elements_, total_));
  if (root)
    for (const ShardPiece& p : pieces_)
      std::copy_n(shard.begin() + std::ptrdiff_t(p.shard_offset), p.count,
                  full.begin() + std::ptrdiff_t(p.flat_offset));
  if (!sharded_) return;
  const auto n = static_cast<std::size_t>(comm.size());
  std::vector<int> counts(n), displs(n);
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    for (std::size_t r = 0; r < n; ++r) {
      counts[r] = static_cast<int>(collectives::chunk_size(buckets_[b].elements, n, r));
      displs[r] = static_cast<int>(collectives::chunk_begin(buckets_[b].elements, n, r));
    }
    const ShardPiece& mine = pieces_[b];
    const float* send = shard.data() + mine.shard_offset;
    if (root)
      MPI_Gatherv(MPI_IN_PLACE, 0, MPI_FLOAT, full.data() + buckets_[b].offset, counts.data(),
                  displs.data(), MPI_FLOAT, 0, comm.handle());
    else
      MPI_Gatherv(send, static_cast<int>(mine.count), MPI_FLOAT, nullptr, nullptr, nullptr,
                  MPI_FLOAT, 0, comm.handle());
  }
}

void update_in_pieces(const ShardPiece& mine, std::size_t piece_elements, const UpdatePiece& update,
                      const std::function<void()>& between_pieces) {
  const std::size_t piece = std::max<std::size_t>(1, piece_elements);
  for (std::size_t done = 0; done < mine.count; done += piece) {
    update(mine.flat_offset + done, std::min(piece, mine.count - done), mine.shard_offset + done);
    if (between_pieces) between_pieces();
  }
}

void check_zero_algorithm(bool zero, collectives::Algorithm algorithm, int world_size) {
  if (zero && algorithm != collectives::Algorithm::kRing && world_size > 1)
    throw UsageError(
        "--zero 1 updates the chunk that the ring's reduce-scatter leaves each rank: use "
        "--collective ring");
}

OptimizerStateBytes optimizer_state_bytes(const collectives::Communicator& comm,
                                          Optimizer& optimizer, const OptimizerShard& shard) {
  const std::vector<OptimizerStateView> views = optimizer.state();
  std::vector<double> bytes(static_cast<std::size_t>(comm.size()), 0.0);
  for (const OptimizerStateView& v : views)
    bytes[static_cast<std::size_t>(comm.rank())] += double(v.values.size_bytes());
  if (comm.size() > 1) collectives::allreduce_sum(comm, std::span<double>(bytes));
  OptimizerStateBytes out;
  for (double b : bytes) out.per_rank.push_back(static_cast<std::size_t>(b));
  out.unsharded = views.size() * shard.total_elements() * sizeof(float);
  return out;
}

std::size_t peak_rss_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;  // "… kB"
  return 0;
}

}  // namespace ringtrain
