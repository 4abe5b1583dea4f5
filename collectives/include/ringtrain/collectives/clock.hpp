// One timeline for all ranks: each rank's clock offset to rank 0's, measured at start-up, so
// that trace events of different ranks (trace.json) line up.
//
// Cristian's method, by ping-pong with rank 0: rank 0 reads its clock (t0) and sends; rank r
// replies with its own reading c; rank 0 reads t1 when the reply arrives. Rank r read c at
// some instant between t0 and t1 of rank 0's clock, so
//   offset = c − (t0 + t1)/2      is off by at most  (t1 − t0)/2  (half the round trip).
// Of `rounds` exchanges the one with the shortest round trip is kept (the others waited
// for the scheduler). On one host with a shared monotonic clock the true offset is 0; across
// hosts it is whatever their clocks differ by.
#pragma once

#include <functional>

#include "ringtrain/collectives/communicator.hpp"

namespace ringtrain::collectives {

struct ClockOffset {
  double offset_s = 0.0;       // this rank's clock minus rank 0's (0 on rank 0)
  double uncertainty_s = 0.0;  // half the kept round trip: |error| <= this
};

// Collective. `clock` returns seconds (e.g. steady_clock); every rank passes its own. Rank 0
// exchanges with ranks 1..N-1 in turn; waiting follows the wait policy of wait.hpp. Throws
// CollectiveError on an MPI failure or rounds < 1.
ClockOffset measure_clock_offset(const Communicator& comm, const std::function<double()>& clock,
                                 int rounds = 8);

}  // namespace ringtrain::collectives
