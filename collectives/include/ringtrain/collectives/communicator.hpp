// The MPI environment and a communicator: who am I, how many are we, how many share my node.
//
// Environment is the RAII owner of MPI itself (MPI_Init_thread / MPI_Finalize); create one
// in main before anything else talks to MPI. Communicator borrows an MPI_Comm and caches
// rank, size and the ranks-per-node count (MPI_Comm_split_type, shared memory).
#pragma once

#include <mpi.h>

#include <stdexcept>
#include <string>

namespace ringtrain::collectives {

// Raised for every failed MPI call or collective misuse; carries the rank.
class CollectiveError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Checks the return code of one MPI call; throws CollectiveError naming the call.
void check_mpi(int code, const char* call);

class Environment {
 public:
  // Initialises MPI (MPI_THREAD_SERIALIZED: any thread may call MPI, one at a time, which a
  // communication thread that polls rings during backward needs) unless it already is.
  Environment(int* argc, char*** argv);
  ~Environment();
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;

 private:
  bool owns_ = false;
};

class Communicator {
 public:
  explicit Communicator(MPI_Comm comm = MPI_COMM_WORLD);

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Ranks of this communicator on this rank's node, and this rank's index among them.
  int ranks_per_node() const { return ranks_per_node_; }
  int local_rank() const { return local_rank_; }
  // The largest message tag MPI allows (MPI_TAG_UB, at least 32767).
  int tag_upper_bound() const { return tag_upper_bound_; }
  MPI_Comm handle() const { return comm_; }

 private:
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1, ranks_per_node_ = 1, local_rank_ = 0, tag_upper_bound_ = 32767;
};

}  // namespace ringtrain::collectives
