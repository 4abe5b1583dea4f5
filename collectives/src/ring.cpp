// The public blocking collectives (see ring.hpp): size check, then the ring (RingTransfer,
// ring_transfer.cpp), the two-level allreduce (hierarchical.hpp) or MPI's own collective for
// comparison.
#include "ringtrain/collectives/ring.hpp"

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "ringtrain/collectives/hierarchical.hpp"

namespace ringtrain::collectives {

namespace {

const char* name_of(Collective which) {
  switch (which) {
    case Collective::kReduceScatter: return "reduce_scatter_sum";
    case Collective::kAllGather: return "all_gather";
    case Collective::kAllreduce: return "allreduce_sum";
  }
  return "?";
}

int mpi_count(std::size_t elements, const char* operation) {
  if (elements > static_cast<std::size_t>(INT_MAX))
    throw CollectiveError(std::string(operation) + ": " + std::to_string(elements) +
                          " elements exceed MPI's int count; use the ring (Algorithm::kRing)");
  return static_cast<int>(elements);
}

// MPI's own collectives on the same chunk partition, for side-by-side comparison.
void run_mpi(const Communicator& comm, std::span<float> data, Collective which) {
  const int count = mpi_count(data.size(), name_of(which));
  const auto M = data.size();
  const auto N = static_cast<std::size_t>(comm.size());
  const auto r = static_cast<std::size_t>(comm.rank());
  if (which == Collective::kAllreduce) {
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, data.data(), count, MPI_FLOAT, MPI_SUM, comm.handle()),
              "MPI_Allreduce");
    return;
  }
  std::vector<int> counts(N), displs(N);
  for (std::size_t i = 0; i < N; ++i) {
    counts[i] = static_cast<int>(chunk_size(M, N, i));
    displs[i] = static_cast<int>(chunk_begin(M, N, i));
  }
  if (which == Collective::kReduceScatter) {
    // In place, MPI writes rank r's reduced block at the start of the buffer: move it home.
    check_mpi(MPI_Reduce_scatter(MPI_IN_PLACE, data.data(), counts.data(), MPI_FLOAT, MPI_SUM,
                                 comm.handle()),
              "MPI_Reduce_scatter");
    const auto size = static_cast<std::ptrdiff_t>(chunk_size(M, N, r));
    std::copy_backward(data.begin(), data.begin() + size,
                       data.begin() + static_cast<std::ptrdiff_t>(chunk_begin(M, N, r)) + size);
    return;
  }
  check_mpi(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data.data(), counts.data(),
                           displs.data(), MPI_FLOAT, comm.handle()),
            "MPI_Allgatherv");
}

}  // namespace

Counters run_collective(RingTransfer& transfer, const Communicator& comm, std::span<float> data,
                        Collective which, const RingOptions& options) {
  const Hierarchy* hierarchy =
      options.algorithm == Algorithm::kHierarchical ? &checked_hierarchy(comm, options) : nullptr;
  if (options.check_sizes) check_same_size(comm, data.size(), name_of(which), options.wait);
  if (hierarchy != nullptr) {
    HierarchicalTransfer hierarchical;
    hierarchical.start(*hierarchy, data, options, {}, which);
    return hierarchical.wait(options.wait);
  }
  if (options.algorithm == Algorithm::kMpi) {
    if (options.wire != Wire::kFp32)
      throw CollectiveError(std::string(name_of(which)) + ": a bf16 wire needs the ring");
    if (comm.size() > 1) run_mpi(comm, data, which);
    return {};
  }
  transfer.start(comm, data, which, options);
  return transfer.wait(options.wait);
}

Counters allreduce_sum(const Communicator& comm, std::span<float> data,
                       const RingOptions& options) {
  RingTransfer transfer;
  return run_collective(transfer, comm, data, Collective::kAllreduce, options);
}

Counters reduce_scatter_sum(const Communicator& comm, std::span<float> data,
                            const RingOptions& options) {
  RingTransfer transfer;
  return run_collective(transfer, comm, data, Collective::kReduceScatter, options);
}

Counters all_gather(const Communicator& comm, std::span<float> data,
                    const RingOptions& options) {
  RingTransfer transfer;
  return run_collective(transfer, comm, data, Collective::kAllGather, options);
}

}  // namespace ringtrain::collectives
