// MPI environment and communicator bookkeeping.
#include "ringtrain/collectives/communicator.hpp"

namespace ringtrain::collectives {

void check_mpi(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  throw CollectiveError("rank " + std::to_string(rank) + ": " + call +
                        " failed: " + std::string(text, static_cast<std::size_t>(length)));
}

Environment::Environment(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  int provided = 0;
  check_mpi(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
  owns_ = true;
}

Environment::~Environment() {
  if (!owns_) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

Communicator::Communicator(MPI_Comm comm) : comm_(comm) {
  check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  MPI_Comm node = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node),
            "MPI_Comm_split_type");
  check_mpi(MPI_Comm_size(node, &ranks_per_node_), "MPI_Comm_size(node)");
  check_mpi(MPI_Comm_rank(node, &local_rank_), "MPI_Comm_rank(node)");
  MPI_Comm_free(&node);
  int* tag_ub = nullptr;
  int found = 0;
  check_mpi(MPI_Comm_get_attr(comm_, MPI_TAG_UB, &tag_ub, &found), "MPI_Comm_get_attr(MPI_TAG_UB)");
  if (found && tag_ub != nullptr) tag_upper_bound_ = *tag_ub;
}

}  // namespace ringtrain::collectives
