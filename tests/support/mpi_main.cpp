// Catch2 session inside MPI: MPI_Init before any test, MPI_Finalize after the last one.
// Only rank 0 reports to the terminal; every rank returns the same exit code because tests
// make ranks agree (mpi_test.hpp) before they REQUIRE.
#define CATCH_CONFIG_RUNNER
#include <mpi.h>

#include <catch2/catch.hpp>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Catch::Session session;
  if (int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
  if (rank != 0) session.configData().outputFilename = "%debug";  // silence other ranks
  int failed = session.run();
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failed != 0 ? 1 : 0;
}
