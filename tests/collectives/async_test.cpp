// The non-blocking allreduce: start, compute while polling, wait.
#include "ringtrain/collectives/async.hpp"

#include <sched.h>

#include <catch2/catch.hpp>
#include <cfloat>
#include <cmath>
#include <string>
#include <vector>

#include "mpi_test.hpp"
#include "ringtrain/collectives/collectives.hpp"

using namespace ringtrain::collectives;
using ringtrain::testing::all_ranks;

namespace {
float value(int rank, std::size_t i) {
  return static_cast<float>((rank + 1) * 100 + static_cast<int>(i % 97));
}
float sum(int N, std::size_t i) {
  return static_cast<float>(50 * N * (N + 1) + N * static_cast<int>(i % 97));
}
}  // namespace

TEST_CASE("AsyncAllreduce: progress between bits of work, then wait") {
  Communicator comm;
  const int N = comm.size(), r = comm.rank();
  bool ok = true;
  AsyncAllreduce reduction;  // reused across sizes and algorithms
  for (Algorithm algorithm : {Algorithm::kRing, Algorithm::kMpi}) {
    for (std::size_t M :
         {std::size_t{0}, std::size_t{1}, static_cast<std::size_t>(N + 1), std::size_t{70001}}) {
      RingOptions options;
      options.algorithm = algorithm;
      options.segment_bytes = 8192;
      std::vector<float> x(M);
      for (std::size_t i = 0; i < M; ++i) x[i] = value(r, i);
      reduction.start(comm, x, options);
      volatile double work = 0;
      int polls = 0;
      while (!reduction.progress() && polls < 1000) {  // "backward" with polls in between
        for (int k = 0; k < 1000; ++k) work = work + k;
        ++polls;
        sched_yield();
      }
      const Counters c = reduction.wait();
      ok &= !reduction.active();
      for (std::size_t i = 0; i < M; ++i) ok &= x[i] == sum(N, i);
      const Counters expected = algorithm == Algorithm::kRing
                                    ? expected_counters(Collective::kAllreduce, M, N, r)
                                    : Counters{};
      ok &= c.rounds == expected.rounds && c.bytes_sent == expected.bytes_sent &&
            c.bytes_received == expected.bytes_received;
    }
  }
  REQUIRE(all_ranks(ok));
}

TEST_CASE("AsyncAllreduce overlaps with a blocking small collective (distinct tags)") {
  Communicator comm;
  const int N = comm.size(), r = comm.rank();
  std::vector<float> x(20000);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = value(r, i);
  AsyncAllreduce reduction;
  reduction.start(comm, x);
  std::vector<double> loss{static_cast<double>(r)};
  allreduce_sum(comm, std::span<double>(loss));  // while the ring is in flight
  reduction.wait();
  bool ok = loss[0] == N * (N - 1) / 2.0;
  for (std::size_t i = 0; i < x.size(); ++i) ok &= x[i] == sum(N, i);
  REQUIRE(all_ranks(ok));
}

TEST_CASE("AsyncAllreduce refuses a second start while active") {
  Communicator comm;
  if (comm.size() == 1) return;  // with one rank a start finishes at once
  std::vector<float> x(100000, 1.0f);
  AsyncAllreduce reduction;
  RingOptions options;
  options.check_sizes = false;
  // Rank 0 starts while every other rank waits in the barrier, so its ring cannot complete:
  // it is active for certain when rank 0 tries (and must fail) to start a second one, which
  // would begin a collective the other ranks never join. Then the others start too.
  bool was_active = false, threw = false;
  if (comm.rank() == 0) {
    reduction.start(comm, x, options);
    was_active = reduction.active();
    try {
      reduction.start(comm, x, options);
    } catch (const CollectiveError&) {
      threw = true;
    }
  }
  MPI_Barrier(comm.handle());
  if (comm.rank() != 0) reduction.start(comm, x, options);
  reduction.wait();
  bool ok = comm.rank() != 0 || (was_active && threw);
  ok &= !reduction.active();
  for (float v : x) ok &= v == static_cast<float>(comm.size());
  INFO("rank " << comm.rank() << ": active before the second start " << was_active
               << ", second start refused " << threw);
  REQUIRE(all_ranks(ok));
}

// The ring tests its own summed chunk for NaN and ±inf (what the trainer's skip decision
// rests on): only the rank whose chunk holds the bad element sees it, so the OR over ranks
// is "the sum is not finite"; a sum that overflows counts too, and finite sums never do.
TEST_CASE("AsyncAllreduce: each rank flags a non-finite value in its own summed chunk") {
  Communicator comm;
  const int N = comm.size(), r = comm.rank();
  const std::size_t M = 1001;
  bool ok = true;
  for (Algorithm algorithm : {Algorithm::kRing, Algorithm::kMpi}) {
    RingOptions options;
    options.algorithm = algorithm;
    options.segment_bytes = 256;  // several segments per chunk
    // bad: -1 none; otherwise the element where the last rank puts a NaN, or where every
    // rank puts 0.75 FLT_MAX (the sum overflows to inf when N >= 2).
    for (const long bad : {-1L, 0L, 500L, long(M) - 1})
      for (const bool overflow : {false, true}) {
        std::vector<float> x(M, float(r + 1));
        if (bad >= 0 && overflow) x[std::size_t(bad)] = 0.75f * FLT_MAX;
        if (bad >= 0 && !overflow && r == N - 1) x[std::size_t(bad)] = NAN;
        AsyncAllreduce reduction;
        reduction.start(comm, x, options);
        while (!reduction.own_chunk_reduced()) {
          reduction.progress();
          sched_yield();
        }
        const bool mine = reduction.sum_not_finite();
        reduction.wait();
        const std::size_t begin = chunk_begin(M, std::size_t(N), std::size_t(r));
        const bool in_my_chunk =
            bad >= 0 && std::size_t(bad) >= begin &&
            std::size_t(bad) < begin + chunk_size(M, std::size_t(N), std::size_t(r));
        const bool expected = in_my_chunk && N >= 2;  // one rank sums nothing, tests nothing
        ok &= mine == expected;
      }
  }
  REQUIRE(all_ranks(ok));
}
