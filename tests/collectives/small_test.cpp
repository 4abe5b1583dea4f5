// Small collectives: sums of doubles in rank order, min/max, barrier.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "mpi_test.hpp"
#include "ringtrain/collectives/small.hpp"

using namespace ringtrain::collectives;
using ringtrain::testing::all_ranks;

TEST_CASE("allreduce_sum(double): exact sums, identical bits on every rank") {
  Communicator comm;
  const int N = comm.size(), r = comm.rank();
  std::vector<double> v{1.0 + r, 0.1 * (r + 1), -static_cast<double>(r * r)};
  allreduce_sum(comm, std::span<double>(v));
  bool ok = v[0] == N * (N + 1) / 2.0;
  ok &= std::abs(v[1] - 0.1 * N * (N + 1) / 2.0) < 1e-12;
  ok &= v[2] == -(N - 1) * N * (2.0 * N - 1) / 6.0;
  // Rank-order summation: the 0.1 sum is bitwise the same everywhere.
  double expected = 0;
  for (int k = 0; k < N; ++k) expected += 0.1 * (k + 1);
  ok &= v[1] == expected;
  std::vector<double> empty;
  allreduce_sum(comm, std::span<double>(empty));
  REQUIRE(all_ranks(ok));
}

TEST_CASE("allreduce_max(double)") {
  Communicator comm;
  const int N = comm.size(), r = comm.rank();
  std::vector<double> v{static_cast<double>(r), -static_cast<double>(r), r == 1 ? 7.5 : 0.0};
  allreduce_max(comm, std::span<double>(v));
  REQUIRE(all_ranks(v[0] == N - 1 && v[1] == 0.0 && v[2] == (N > 1 ? 7.5 : 0.0)));
}

TEST_CASE("allreduce_min_max and barrier") {
  Communicator comm;
  const int N = comm.size(), r = comm.rank();
  std::uint64_t lo = 0, hi = 0;
  allreduce_min_max(comm, 1000u + static_cast<std::uint64_t>(r) * 7u, lo, hi);
  bool ok = lo == 1000u && hi == 1000u + static_cast<std::uint64_t>(N - 1) * 7u;
  for (int k = 0; k < 10; ++k) barrier(comm);
  allreduce_min_max(comm, 42u, lo, hi);
  ok &= lo == 42u && hi == 42u;
  REQUIRE(all_ranks(ok));
}
