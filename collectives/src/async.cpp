// Non-blocking allreduce (see async.hpp): the ring's state machine, the hierarchical one
// (hierarchical.hpp), or MPI_Iallreduce.
#include "ringtrain/collectives/async.hpp"

#include <cfloat>
#include <climits>
#include <cmath>
#include <string>

#include "ringtrain/collectives/small.hpp"

namespace ringtrain::collectives {

AsyncAllreduce::~AsyncAllreduce() {
  if (mpi_request_ != MPI_REQUEST_NULL) MPI_Wait(&mpi_request_, MPI_STATUS_IGNORE);
  // ring_'s own destructor completes an active ring transfer.
}

void AsyncAllreduce::start(const Communicator& comm, std::span<float> data,
                           const RingOptions& options, Collective which,
                           std::span<float> residual) {
  if (active())
    throw CollectiveError("rank " + std::to_string(comm.rank()) +
                          ": AsyncAllreduce::start while the previous reduction is active");
  if (which != Collective::kAllreduce && options.algorithm == Algorithm::kMpi)
    throw CollectiveError(
        "AsyncAllreduce: a reduce-scatter or all-gather alone needs the ring or the "
        "hierarchical algorithm, not MPI's allreduce");
  if (options.wire != Wire::kFp32 && options.algorithm == Algorithm::kMpi)
    throw CollectiveError("AsyncAllreduce: a bf16 wire needs the ring (Algorithm::kRing)");
  const Hierarchy* hierarchy =
      options.algorithm == Algorithm::kHierarchical ? &checked_hierarchy(comm, options) : nullptr;
  comm_ = &comm;
  options_ = options;
  data_ = data;
  mpi_not_finite_ = false;
  if (options.check_sizes) check_same_size(comm, data.size(), "AsyncAllreduce", options.wait);
  if (options.algorithm == Algorithm::kRing) {
    ring_.start(comm, data, which, options, residual);
    return;
  }
  if (hierarchy != nullptr) {
    hierarchical_.start(*hierarchy, data, options, residual, which);
    return;
  }
  if (comm.size() == 1 || data.empty()) return;
  if (data.size() > static_cast<std::size_t>(INT_MAX))
    throw CollectiveError("AsyncAllreduce: too many elements for MPI_Iallreduce");
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, data.data(), static_cast<int>(data.size()), MPI_FLOAT,
                           MPI_SUM, comm.handle(), &mpi_request_),
            "MPI_Iallreduce");
}

ChunkRange reduce_scatter_shard(std::size_t M, int N, int rank, const RingOptions& options) {
  if (options.algorithm == Algorithm::kHierarchical) {
    if (options.hierarchy == nullptr)
      throw CollectiveError("rank " + std::to_string(rank) +
                            ": Algorithm::kHierarchical needs RingOptions::hierarchy");
    return hierarchical_shard(M, options.hierarchy->layout());
  }
  const auto n = static_cast<std::size_t>(N), r = static_cast<std::size_t>(rank);
  return {chunk_begin(M, n, r), chunk_size(M, n, r)};
}

bool AsyncAllreduce::progress() {
  if (mpi_request_ != MPI_REQUEST_NULL) {
    int flag = 0;
    check_mpi(MPI_Test(&mpi_request_, &flag, MPI_STATUS_IGNORE), "MPI_Test");
    if (flag) check_own_chunk();
    return flag != 0;
  }
  if (options_.algorithm == Algorithm::kHierarchical) return hierarchical_.progress();
  return ring_.progress();
}

Counters AsyncAllreduce::wait() {
  if (mpi_request_ != MPI_REQUEST_NULL) {
    check_mpi(MPI_Wait(&mpi_request_, MPI_STATUS_IGNORE), "MPI_Wait");
    check_own_chunk();
    return {};
  }
  if (options_.algorithm == Algorithm::kMpi) return {};
  if (options_.algorithm == Algorithm::kHierarchical) return hierarchical_.wait(options_.wait);
  return ring_.wait(options_.wait);
}

Counters AsyncAllreduce::counters() const {
  if (options_.algorithm == Algorithm::kMpi) return {};
  if (options_.algorithm == Algorithm::kHierarchical) return hierarchical_.counters();
  return ring_.counters();
}

bool AsyncAllreduce::own_chunk_reduced() const {
  if (options_.algorithm == Algorithm::kMpi) return mpi_request_ == MPI_REQUEST_NULL;
  if (options_.algorithm == Algorithm::kHierarchical) return hierarchical_.own_chunk_reduced();
  return ring_.own_chunk_reduced();
}

bool AsyncAllreduce::sum_not_finite() const {
  if (options_.algorithm == Algorithm::kMpi) return mpi_not_finite_;
  if (options_.algorithm == Algorithm::kHierarchical) return hierarchical_.sum_not_finite();
  return ring_.sum_not_finite();
}

void AsyncAllreduce::check_own_chunk() {
  const auto M = data_.size(), N = static_cast<std::size_t>(comm_->size());
  const auto r = static_cast<std::size_t>(comm_->rank());
  for (float v : data_.subspan(chunk_begin(M, N, r), chunk_size(M, N, r)))
    mpi_not_finite_ = mpi_not_finite_ || !(std::fabs(v) <= FLT_MAX);
}

}  // namespace ringtrain::collectives
