// Clock offsets by ping-pong (clock.hpp) and the text gather to one rank (small.hpp).
#include "ringtrain/collectives/clock.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <string>

#include "mpi_test.hpp"
#include "ringtrain/collectives/small.hpp"

using namespace ringtrain::collectives;
using ringtrain::testing::all_ranks;

namespace {
double steady_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

TEST_CASE("clock offset: found within its uncertainty, for a shared clock and a skewed one") {
  Communicator comm;
  const int r = comm.rank();
  // One host shares the monotonic clock: the true offset is 0.
  const ClockOffset same = measure_clock_offset(comm, steady_s);
  // A clock that runs 1000 s per rank ahead of rank 0's: the true offset is 1000·r.
  const ClockOffset skewed = measure_clock_offset(comm, [r] { return steady_s() + 1000.0 * r; });
  bool ok = std::abs(same.offset_s) <= same.uncertainty_s + 1e-12 &&
            std::abs(skewed.offset_s - 1000.0 * r) <= skewed.uncertainty_s + 1e-9 &&
            same.uncertainty_s < 1.0;
  if (r == 0) ok = ok && same.offset_s == 0.0 && same.uncertainty_s == 0.0;
  REQUIRE(all_ranks(ok));
  CHECK_THROWS_AS(measure_clock_offset(comm, steady_s, 0), CollectiveError);
}

TEST_CASE("gather_text: rank order at the root, lengths from 0 to large, nothing elsewhere") {
  Communicator comm;
  const int N = comm.size(), r = comm.rank();
  for (int root = 0; root < N; ++root) {
    // Rank k sends k·1000 bytes of the letter 'a' + k (rank 0 sends nothing).
    const std::string mine(std::size_t(r) * 1000, char('a' + r));
    const std::vector<std::string> all = gather_text(comm, mine, root);
    bool ok = true;
    if (r == root) {
      ok = all.size() == std::size_t(N);
      for (int k = 0; ok && k < N; ++k)
        ok = all[std::size_t(k)] == std::string(std::size_t(k) * 1000, char('a' + k));
    } else {
      ok = all.empty();
    }
    REQUIRE(all_ranks(ok));
  }
  CHECK_THROWS_AS(gather_text(comm, "x", N), CollectiveError);
}
