// ringtrain: the executable. Sets up MPI, builds the command line, runs one subcommand, and
// turns every error into one clear line and an exit code:
//   0  success                      2  bad usage (flag, value, config key); nothing written
//   1  failure agreed by all ranks (bad data, diverged replicas, failed checkpoint)
//   a rank that fails alone prints its message with its rank and aborts the whole job
//   (MPI_Abort), since the others would otherwise wait for it forever.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "command_line.hpp"
#include "ringtrain/checkpoint/contained.hpp"
#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/framework/blas.hpp"

int main(int argc, char** argv) {
  // A contained checkpoint reader (a child this program started to parse one file with
  // libhdf5): it serves its one request and exits, before MPI, BLAS or threads exist.
  // _Exit: the reply is written; the libraries' exit handlers (HDF5, UCX, OpenBLAS) would
  // only add time to every read.
  if (argc >= 2 && std::string(argv[1]) == ringtrain::checkpoint::kReaderSubcommand)
    std::_Exit(ringtrain::checkpoint::serve_contained_reader(argc, argv));
  // Every checkpoint this process reads from outside (--resume, inspect) is parsed in such
  // a child, so that a file that crashes libhdf5 is refused instead of ending the job.
  ringtrain::checkpoint::enable_contained_reader(
      ringtrain::checkpoint::default_reader_executable());
  // Before MPI and threads: OpenBLAS may have loaded generic kernels for a CPU it does not
  // know, and its idle threads spin; this re-executes the program with the right
  // OPENBLAS_CORETYPE and OPENBLAS_THREAD_TIMEOUT (blas.hpp).
  ringtrain::blas::reexec_with_better_core(argv);
  // train and eval read a user's HDF5 data (and checkpoints) in such a child: one started now,
  // before MPI's start-up, is warm by the time the data are loaded.
  if (argc >= 2 && (std::string(argv[1]) == "train" || std::string(argv[1]) == "eval"))
    ringtrain::checkpoint::prepare_contained_reader();
  // A file size limit (ulimit -f) makes a write fail with EFBIG instead of killing the
  // process: a checkpoint that does not fit is then a failed save, which the run survives.
  std::signal(SIGXFSZ, SIG_IGN);
  ringtrain::collectives::Environment mpi(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  const ringtrain::cli::Outcome outcome =
      ringtrain::cli::run_command_line(std::vector<std::string>(argv + 1, argv + argc));
  using Scope = ringtrain::cli::Outcome::Scope;
  if (outcome.scope == Scope::kAgreed && !outcome.message.empty() && rank == 0)
    std::fprintf(stderr, "ringtrain: error: %s\n", outcome.message.c_str());
  if (outcome.scope == Scope::kRank) {
    std::fprintf(stderr, "ringtrain: rank %d of %d: error: %s\n", rank, size,
                 outcome.message.c_str());
    std::fflush(stderr);
    if (size > 1) MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return outcome.exit_code;
}
