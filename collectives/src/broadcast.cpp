// Broadcast down the ring, pipelined in segments (see ring.hpp).
//
// Position p = (rank - root) mod N along the chain root -> root+1 -> ... -> root-1:
//   p = 0        sends every segment to the right
//   0 < p < N-1  receives segment j from the left, then forwards it to the right
//   p = N-1      only receives
// With S segments the last rank has everything after (N-1) + (S-1) segment times instead of
// (N-1)·S: the chain is full after N-1 segments. Receives go straight into the caller's
// buffer; requests live in small fixed arrays, so nothing is allocated.
#include <algorithm>
#include <array>
#include <climits>
#include <string>

#include "ringtrain/collectives/ring.hpp"

namespace ringtrain::collectives {

namespace {
constexpr std::size_t kWindow = 8;  // segments in flight per direction
}

void broadcast(const Communicator& comm, std::span<float> data, int root,
               const RingOptions& options) {
  const int N = comm.size();
  if (root < 0 || root >= N)
    throw CollectiveError("broadcast: root " + std::to_string(root) + " is not a rank of a " +
                          std::to_string(N) + "-rank communicator");
  if (options.check_sizes) check_same_size(comm, data.size(), "broadcast", options.wait);
  if (N == 1 || data.empty()) return;
  if (options.algorithm == Algorithm::kMpi) {
    if (data.size() > static_cast<std::size_t>(INT_MAX))
      throw CollectiveError("broadcast: too many elements for MPI_Bcast");
    check_mpi(MPI_Bcast(data.data(), static_cast<int>(data.size()), MPI_FLOAT, root,
                        comm.handle()),
              "MPI_Bcast");
    return;
  }

  const int position = (comm.rank() - root + N) % N;
  const bool receives = position > 0, sends = position < N - 1;
  const std::size_t seg = segment_elements(options.segment_bytes);
  const std::size_t segments = num_segments(data.size(), seg);
  auto segment = [&](std::size_t j) { return data.subspan(j * seg, std::min(seg, data.size() - j * seg)); };

  std::array<MPI_Request, kWindow> recv_requests{}, send_requests{};
  std::size_t recv_posted = 0, recv_done = receives ? 0 : segments;
  std::size_t send_posted = 0, send_done = sends ? 0 : segments;
  if (!receives) recv_posted = segments;
  if (!sends) send_posted = segments;
  const int left = ring_left(comm.rank(), N), right = ring_right(comm.rank(), N);

  Waiter waiter(resolve_wait_policy(options.wait, comm));
  while (recv_done < segments || send_done < segments) {
    bool moved = false;
    while (recv_posted < segments && recv_posted - recv_done < kWindow) {
      auto s = segment(recv_posted);
      check_mpi(MPI_Irecv(s.data(), static_cast<int>(s.size()), MPI_FLOAT, left, options.tag,
                          comm.handle(), &recv_requests[recv_posted % kWindow]),
                "MPI_Irecv");
      ++recv_posted;
      moved = true;
    }
    // Forward segment j once it is here (the root has them all from the start).
    while (send_posted < segments && send_posted - send_done < kWindow &&
           (!receives || send_posted < recv_done)) {
      auto s = segment(send_posted);
      check_mpi(MPI_Isend(s.data(), static_cast<int>(s.size()), MPI_FLOAT, right, options.tag,
                          comm.handle(), &send_requests[send_posted % kWindow]),
                "MPI_Isend");
      ++send_posted;
      moved = true;
    }
    int flag = 1;
    while (recv_done < recv_posted && flag) {
      check_mpi(MPI_Test(&recv_requests[recv_done % kWindow], &flag, MPI_STATUS_IGNORE),
                "MPI_Test");
      if (flag) ++recv_done, moved = true;
    }
    flag = 1;
    while (send_done < send_posted && flag) {
      check_mpi(MPI_Test(&send_requests[send_done % kWindow], &flag, MPI_STATUS_IGNORE),
                "MPI_Test");
      if (flag) ++send_done, moved = true;
    }
    if (moved)
      waiter.reset();
    else
      waiter.idle();
  }
}

}  // namespace ringtrain::collectives
