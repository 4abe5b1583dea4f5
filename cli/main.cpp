// ringtrain: the executable. Sets up MPI, builds the command line, runs one subcommand, and
// turns every error into one clear line and an exit code:
//   0  success                      2  bad usage (flag, value, config key); nothing written
//   1  failure agreed by all ranks (bad data, diverged replicas, failed checkpoint)
//   a rank that fails alone prints its message with its rank and aborts the whole job
//   (MPI_Abort), since the others would otherwise wait for it forever.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "commands.hpp"
#include "config_file.hpp"
#include "ringtrain/checkpoint/contained.hpp"
#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/framework/blas.hpp"
#include "ringtrain/framework/error.hpp"

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
  // A file size limit (ulimit -f) makes a write fail with EFBIG instead of killing the
  // process: a checkpoint that does not fit is then a failed save, which the run survives.
  std::signal(SIGXFSZ, SIG_IGN);
  ringtrain::collectives::Environment mpi(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const bool leader = rank == 0;

  CLI::App app{
      "ringtrain: synchronous data-parallel training on CPUs over MPI.\n"
      "Run under mpiexec (mpiexec -n 2 ringtrain train) or alone (one rank)."};
  app.require_subcommand(1);
  app.set_version_flag("--version", RINGTRAIN_VERSION);
  ringtrain::cli::Runner run;
  ringtrain::cli::add_train(app, run);
  ringtrain::cli::add_inspect(app, run);
  ringtrain::cli::add_eval(app, run);
  ringtrain::cli::add_model(app, run, leader);
  CLI::App* bench = app.add_subcommand("bench", "benchmarks that print ratios against a peer");
  bench->require_subcommand(1);
  ringtrain::cli::add_bench_allreduce(*bench, run);

  try {
    std::vector<std::string> args(argv + 1, argv + argc);
    args.insert(args.begin(), argv[0]);
    args = ringtrain::cli::expand_config_files(args, app);
    args.erase(args.begin());                // CLI11 takes the arguments without argv[0],
    std::reverse(args.begin(), args.end());  // last one first
    app.parse(args);
  } catch (const ringtrain::UsageError& e) {
    if (leader) std::fprintf(stderr, "ringtrain: error: %s\n", e.what());
    return 2;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {  // --help, --version
      if (leader) app.exit(e);
      return 0;
    }
    if (leader) std::fprintf(stderr, "ringtrain: error: %s (see 'ringtrain --help')\n", e.what());
    return 2;
  }

  try {
    return run();
  } catch (const ringtrain::UsageError& e) {
    if (leader) std::fprintf(stderr, "ringtrain: error: %s\n", e.what());
    return 2;
  } catch (const ringtrain::AgreedError& e) {
    if (leader) std::fprintf(stderr, "ringtrain: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringtrain: rank %d of %d: error: %s\n", rank, size, e.what());
    std::fflush(stderr);
    if (size > 1) MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
}
