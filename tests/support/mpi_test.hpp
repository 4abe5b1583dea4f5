// Helpers for MPI tests: ranks agree on a fact before they REQUIRE it, so a failure on one
// rank fails every rank instead of leaving the others hanging in the next collective.
#pragma once

#include <mpi.h>

namespace ringtrain::testing {

// True on every rank iff `ok` is true on every rank. Collective.
inline bool all_ranks(bool ok) {
  int local = ok ? 1 : 0, global = 0;
  MPI_Allreduce(&local, &global, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return global == 1;
}

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

inline int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

}  // namespace ringtrain::testing
