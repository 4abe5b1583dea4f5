// The BLAS thread count of a rank changes no bit under --gemm own: a few steps of the mlp, the
// cnn, the cnn-bn (BatchNorm's sums cut by channels, its maps by rows) and an mlp with dropout
// (threads_dropout.toml) at 1, 2 and 3 threads per rank end with bitwise the same parameters
// and buffers (BatchNorm's running statistics) (threads may exceed the cores: this is about
// what is computed, not how fast). The own kernels cut each
// product into blocks of whole output elements (blas.hpp: Kernels), OpenBLAS runs the rest on
// one thread, and the convolutions cut the batch into the same parts at any thread count.
// Batches of 64 and 128 samples per rank put all three products of the 1024-wide layers on
// the own kernels.
#include <catch2/catch.hpp>
#include <string>

#include "mpi_test.hpp"
#include "ringtrain/framework/blas.hpp"
#include "train_rig.hpp"

using namespace ringtrain;
using namespace ringtrain::testing;

namespace {

// Parameters, then buffers, after `steps` steps of `model` at `threads` BLAS threads per rank.
std::vector<float> parameters_after(const std::string& model, std::uint64_t steps,
                                    std::size_t global_batch, int threads) {
  TrainConfig config = small_config(model, steps, global_batch);
  config.blas_threads = threads;
  config.gemm = GemmChoice::kOwn;
  RunOutput out = train_on(config, MPI_COMM_WORLD);
  out.parameters.insert(out.parameters.end(), out.buffers.begin(), out.buffers.end());
  return out.parameters;
}

void require_same_bits_at_1_2_3_threads(const std::string& model, std::uint64_t steps,
                                        std::size_t global_batch) {
  if (!blas::own_kernels_supported()) {
    // --gemm openblas runs OpenBLAS's own threading, whose bits may change with the thread
    // count: nothing is promised there.
    WARN(
        "this CPU has neither AVX-512F nor AVX2 and FMA: the own kernels, and the promise, do "
        "not apply");
    return;
  }
  const std::vector<float> one = parameters_after(model, steps, global_batch, 1);
  for (int threads : {2, 3}) {
    INFO(model << ", global batch " << global_batch << ": " << threads << " threads per rank");
    REQUIRE(all_ranks(bitwise_equal(parameters_after(model, steps, global_batch, threads), one)));
  }
  // Control: the comparison sees a difference when there is one.
  REQUIRE(all_ranks(!bitwise_equal(parameters_after(model, steps + 1, global_batch, 1), one)));
}

}  // namespace

TEST_CASE("mlp: the same parameters at 1, 2 and 3 BLAS threads per rank") {
  require_same_bits_at_1_2_3_threads("mlp", 4, 128);
}

TEST_CASE("cnn: the same parameters at 1, 2 and 3 BLAS threads per rank") {
  require_same_bits_at_1_2_3_threads("cnn", 3, 64);
}

TEST_CASE("cnn-bn: the same parameters at 1, 2 and 3 BLAS threads per rank") {
  require_same_bits_at_1_2_3_threads("cnn-bn", 2, 64);
}

TEST_CASE("dropout: the same parameters at 1, 2 and 3 BLAS threads per rank") {
  require_same_bits_at_1_2_3_threads(RINGTRAIN_THREADS_DROPOUT_SPEC, 3, 128);
}
