// The optimizer's shard of the flat buffer, and the update of a piece of it (see
// optimizer_shard.hpp).
#include "ringtrain/framework/train/optimizer_shard.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <fstream>
#include <string>

#include "ringtrain/collectives/async.hpp"
#include "ringtrain/collectives/small.hpp"
#include "ringtrain/framework/error.hpp"

namespace ringtrain {

OptimizerShard::OptimizerShard(std::span<const collectives::Bucket> buckets,
                               std::size_t total_elements, int N, int rank, bool sharded,
                               const collectives::RingOptions& ring)
    : buckets_(buckets.begin(), buckets.end()), total_(total_elements), sharded_(sharded) {
  for (const collectives::Bucket& b : buckets_) {
    ShardPiece p{b.offset, b.elements, b.offset};
    if (sharded_) {
      const collectives::ChunkRange mine =
          collectives::reduce_scatter_shard(b.elements, N, rank, ring);
      p = {b.offset + mine.begin, mine.size, elements_};
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

OptimizerShard::PieceTable OptimizerShard::piece_table(
    const collectives::Communicator& comm) const {
  const std::size_t B = buckets_.size(), N = static_cast<std::size_t>(comm.size());
  std::vector<int> mine(2 * B), all(2 * B * N);
  for (std::size_t b = 0; b < B; ++b) {
    if (buckets_[b].elements > static_cast<std::size_t>(INT_MAX))
      throw Error(fmt::format("OptimizerShard: bucket {} has {} elements, more than MPI counts", b,
                              buckets_[b].elements));
    mine[2 * b] = static_cast<int>(pieces_[b].count);
    mine[2 * b + 1] = static_cast<int>(pieces_[b].flat_offset - buckets_[b].offset);
  }
  collectives::check_mpi(MPI_Allgather(mine.data(), static_cast<int>(2 * B), MPI_INT, all.data(),
                                       static_cast<int>(2 * B), MPI_INT, comm.handle()),
                         "MPI_Allgather(shard pieces)");
  PieceTable table{std::vector<int>(B * N), std::vector<int>(B * N)};
  for (std::size_t q = 0; q < N; ++q)
    for (std::size_t b = 0; b < B; ++b) {
      table.counts[b * N + q] = all[q * 2 * B + 2 * b];
      table.displs[b * N + q] = all[q * 2 * B + 2 * b + 1];
    }
  return table;
}

std::size_t OptimizerShard::shard_elements(const PieceTable& table, int q, int N) const {
  std::size_t elements = 0;
  for (std::size_t b = 0; b < buckets_.size(); ++b)
    elements += static_cast<std::size_t>(table.counts[b * std::size_t(N) + std::size_t(q)]);
  return elements;
}

void OptimizerShard::place_rank(const PieceTable& table, int q, int N,
                                std::span<const float> shard_q, std::span<float> full) const {
  if (shard_q.size() != shard_elements(table, q, N) || full.size() != total_)
    throw Error(
        fmt::format("OptimizerShard::place_rank: rank {}'s shard has {} elements, "
                    "expected {}; full has {}, expected {}",
                    q, shard_q.size(), shard_elements(table, q, N), full.size(), total_));
  std::size_t from = 0;  // rank q's pieces lie end to end in bucket order
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    const std::size_t i = b * std::size_t(N) + std::size_t(q);
    const auto count = static_cast<std::size_t>(table.counts[i]);
    std::copy_n(shard_q.begin() + std::ptrdiff_t(from), count,
                full.begin() + std::ptrdiff_t(buckets_[b].offset + std::size_t(table.displs[i])));
    from += count;
  }
}

void OptimizerShard::place(std::span<const float> shard, std::span<float> full) const {
  for (const ShardPiece& p : pieces_)
    std::copy_n(shard.begin() + std::ptrdiff_t(p.shard_offset), p.count,
                full.begin() + std::ptrdiff_t(p.flat_offset));
}

void OptimizerShard::gather(const collectives::Communicator& comm, std::span<const float> shard,
                            std::span<float> full) const {
  if (full.size() != total_ || shard.size() != elements_)
    throw Error(fmt::format("OptimizerShard::gather: got {} and {} elements, expected {} and {}",
                            shard.size(), full.size(), elements_, total_));
  place(shard, full);
  if (!sharded_ || comm.size() == 1) return;
  const PieceTable table = piece_table(comm);
  const auto N = static_cast<std::size_t>(comm.size());
  for (std::size_t b = 0; b < buckets_.size(); ++b)
    collectives::check_mpi(
        MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, full.data() + buckets_[b].offset,
                       table.counts.data() + b * N, table.displs.data() + b * N, MPI_FLOAT,
                       comm.handle()),
        "MPI_Allgatherv(optimizer shard)");
}

void OptimizerShard::gather_to_root(const collectives::Communicator& comm,
                                    std::span<const float> shard, std::span<float> full) const {
  const bool root = comm.rank() == 0;
  if (shard.size() != elements_ || (root && full.size() != total_))
    throw Error(
        fmt::format("OptimizerShard::gather_to_root: got {} and {} elements, expected {} "
                    "and {}",
                    shard.size(), full.size(), elements_, total_));
  if (root) place(shard, full);
  if (!sharded_ || comm.size() == 1) return;
  const PieceTable table = piece_table(comm);
  const auto N = static_cast<std::size_t>(comm.size());
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    const ShardPiece& mine = pieces_[b];
    if (root)
      collectives::check_mpi(
          MPI_Gatherv(MPI_IN_PLACE, 0, MPI_FLOAT, full.data() + buckets_[b].offset,
                      table.counts.data() + b * N, table.displs.data() + b * N, MPI_FLOAT, 0,
                      comm.handle()),
          "MPI_Gatherv(optimizer shard)");
    else
      collectives::check_mpi(
          MPI_Gatherv(shard.data() + mine.shard_offset, static_cast<int>(mine.count), MPI_FLOAT,
                      nullptr, nullptr, nullptr, MPI_FLOAT, 0, comm.handle()),
          "MPI_Gatherv(optimizer shard)");
  }
}

ShardPiece piece_after(const ShardPiece& mine, std::size_t done, std::size_t piece_elements) {
  if (done >= mine.count) return {mine.flat_offset + mine.count, 0, mine.shard_offset + mine.count};
  const std::size_t count = std::min(std::max<std::size_t>(1, piece_elements), mine.count - done);
  return {mine.flat_offset + done, count, mine.shard_offset + done};
}

void check_zero_algorithm(bool zero, collectives::Algorithm algorithm, int world_size) {
  if (zero && algorithm == collectives::Algorithm::kMpi && world_size > 1)
    throw UsageError(
        "--zero 1 updates the shard that a reduce-scatter leaves each rank, and MPI's "
        "allreduce runs no halves: use --collective ring or hierarchical");
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
