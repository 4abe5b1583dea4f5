// Same N, same seed, same build: bitwise the same parameters, run after run;
// and every rank ends with the bitwise same replica.
#include <catch2/catch.hpp>
#include <cstring>

#include "mpi_test.hpp"
#include "train_rig.hpp"

using namespace ringtrain;
using namespace ringtrain::testing;

namespace {

// True on every rank iff all ranks hold bitwise the same buffer (compared with rank 0's).
bool replicas_identical(const std::vector<float>& values) {
  std::vector<float> root = values;
  MPI_Bcast(root.data(), int(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  return all_ranks(bitwise_equal(values, root));
}

}  // namespace

TEST_CASE("two runs with the same seed end with bitwise identical parameters") {
  TrainConfig config = small_config("mlp", 15, 64);
  config.mlp_hidden = "128,64";
  const RunOutput first = train_on(config, MPI_COMM_WORLD);
  const RunOutput second = train_on(config, MPI_COMM_WORLD);
  REQUIRE(all_ranks(bitwise_equal(first.parameters, second.parameters)));
  REQUIRE(replicas_identical(first.parameters));

  config.seed = 1;
  const RunOutput other_seed = train_on(config, MPI_COMM_WORLD);
  REQUIRE(all_ranks(!bitwise_equal(first.parameters, other_seed.parameters)));
}

TEST_CASE("dropout and batch norm runs are reproducible too") {
  TrainConfig config = small_config("cnn-bn", 4, 16);
  config.dropout = 0.3f;
  const RunOutput first = train_on(config, MPI_COMM_WORLD);
  const RunOutput second = train_on(config, MPI_COMM_WORLD);
  REQUIRE(all_ranks(bitwise_equal(first.parameters, second.parameters)));
  REQUIRE(all_ranks(bitwise_equal(first.buffers, second.buffers)));
  REQUIRE(replicas_identical(first.parameters));
  REQUIRE(replicas_identical(first.buffers));
}
