// Clock offsets by ping-pong with rank 0 (see clock.hpp).
#include "ringtrain/collectives/clock.hpp"

#include <limits>
#include <string>

#include "ringtrain/collectives/wait.hpp"

namespace ringtrain::collectives {

namespace {

constexpr int kClockTag = 0x434c4b;

// One message of `count` doubles, sent or received without spinning on a shared core.
void exchange(const Communicator& comm, double* data, int count, int peer, bool send) {
  MPI_Request request = MPI_REQUEST_NULL;
  if (send)
    check_mpi(MPI_Isend(data, count, MPI_DOUBLE, peer, kClockTag, comm.handle(), &request),
              "MPI_Isend");
  else
    check_mpi(MPI_Irecv(data, count, MPI_DOUBLE, peer, kClockTag, comm.handle(), &request),
              "MPI_Irecv");
  wait_request(comm, request, WaitPolicy::kAuto);
}

}  // namespace

ClockOffset measure_clock_offset(const Communicator& comm, const std::function<double()>& clock,
                                 int rounds) {
  if (rounds < 1)
    throw CollectiveError("measure_clock_offset: rounds = " + std::to_string(rounds) +
                          ", need at least 1");
  ClockOffset mine;
  if (comm.size() == 1) return mine;
  if (comm.rank() != 0) {
    double message[2] = {0.0, 0.0};
    for (int k = 0; k < rounds; ++k) {
      exchange(comm, message, 1, 0, false);  // ping
      message[0] = clock();
      exchange(comm, message, 1, 0, true);  // pong: my clock
    }
    exchange(comm, message, 2, 0, false);  // the result: offset, uncertainty
    mine.offset_s = message[0];
    mine.uncertainty_s = message[1];
    return mine;
  }
  for (int r = 1; r < comm.size(); ++r) {
    double best[2] = {0.0, std::numeric_limits<double>::infinity()};
    for (int k = 0; k < rounds; ++k) {
      double message[1] = {0.0};
      const double t0 = clock();
      exchange(comm, message, 1, r, true);
      exchange(comm, message, 1, r, false);
      const double t1 = clock();
      if ((t1 - t0) / 2 < best[1]) {
        best[0] = message[0] - (t0 + t1) / 2;
        best[1] = (t1 - t0) / 2;
      }
    }
    exchange(comm, best, 2, r, true);
  }
  return mine;
}

}  // namespace ringtrain::collectives
