// Helpers for MPI tests: ranks agree on a fact before they REQUIRE it, so a failure on one
// rank fails every rank instead of leaving the others hanging in the next collective.
#pragma once

#include <mpi.h>

#include <cstdlib>
#include <filesystem>
#include <string>

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

// A fresh folder every rank sees: rank 0 makes it under /tmp with `prefix` in its name, the
// others learn its name. Collective. Empty if rank 0 could not make it.
inline std::filesystem::path shared_temp_dir(const std::string& prefix) {
  char name[128] = {};
  if (world_rank() == 0) {
    std::string pattern = "/tmp/" + prefix + "-XXXXXX";
    pattern.copy(name, sizeof name - 1);
    if (mkdtemp(name) == nullptr) name[0] = '\0';
  }
  MPI_Bcast(name, sizeof name, MPI_CHAR, 0, MPI_COMM_WORLD);
  return name;
}

// The facts a test checks on this rank, and in words the ones that failed. Ranks agree on the
// verdict before they REQUIRE (REQUIRE_ALL_RANKS), and each rank prints what failed on it.
class Facts {
 public:
  // Records `fact`; when it is false, `what` says what was seen instead. Returns `fact`.
  bool check(bool fact, const std::string& what) {
    if (!fact) why_ += what + "; ";
    return fact;
  }
  bool hold() const { return why_.empty(); }
  const std::string& why() const { return why_; }

 private:
  std::string why_;
};

}  // namespace ringtrain::testing

// Fails on every rank if a fact failed on any rank, printing this rank's failures.
#define REQUIRE_ALL_RANKS(facts)                                                  \
  do {                                                                            \
    INFO("rank " << ::ringtrain::testing::world_rank() << ": " << (facts).why()); \
    REQUIRE(::ringtrain::testing::all_ranks((facts).hold()));                     \
  } while (false)
