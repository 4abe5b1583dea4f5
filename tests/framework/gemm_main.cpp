// The main of the own-kernel test (gemm_test.cpp): on a CPU with neither AVX-512F nor AVX2 and
// FMA nothing there can run, and it exits 77, which ctest reports as skipped. Holds Catch2's
// implementation, so it is compiled unoptimised like support/unit_main.cpp.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>

#include "ringtrain/framework/blas.hpp"

int main(int argc, char* argv[]) {
  if (!ringtrain::blas::own_kernels_supported()) {
    std::printf(
        "this CPU has neither AVX-512F nor AVX2 and FMA: ringtrain's own kernels cannot "
        "run here (skipped)\n");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
