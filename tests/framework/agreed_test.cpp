// Failing together (agreed.hpp), at N = 1, 2, 3, 4, for every set of ranks that fail: when
// none fails every rank gets the work's value; when some fail every rank throws the agreed
// error type, rank 0 with the message of the lowest rank that failed, and each failing rank
// with its own. The same for fail_together, and for work that returns nothing.
#include "ringtrain/framework/agreed.hpp"

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <string>

#include "mpi_test.hpp"

using namespace ringtrain;
using namespace ringtrain::testing;

namespace {

std::string failure_of(int rank) {
  return fmt::format("rank {} cannot read its file", rank);
}

// What one rank saw of one agreement: the value, or the message of the error it threw.
struct Seen {
  bool threw = false;
  std::string message;
  int value = 0;
};

// Checks one rank's view of an agreement where the ranks in `failing` (a bit per rank) failed.
void check(const Seen& seen, unsigned failing, int rank, int size, Facts& facts, const char* how) {
  int lowest = -1;
  for (int r = size - 1; r >= 0; --r)
    if ((failing >> r) & 1u) lowest = r;
  const std::string where = fmt::format("{}, failing ranks {:#x}, rank {}", how, failing, rank);
  if (lowest < 0) {
    facts.check(!seen.threw, where + ": threw '" + seen.message + "' though none failed");
    return;
  }
  facts.check(seen.threw, where + ": did not throw");
  if (rank == 0)
    facts.check(seen.message == failure_of(lowest),
                where + ": rank 0 says '" + seen.message + "', not the lowest failing rank's");
  else if ((failing >> rank) & 1u)
    facts.check(seen.message == failure_of(rank), where + ": says '" + seen.message + "'");
}

}  // namespace

TEST_CASE("every rank fails together, and rank 0 carries the lowest failing rank's message") {
  const collectives::Communicator comm;
  const int rank = comm.rank(), size = comm.size();
  Facts facts;
  for (unsigned failing = 0; failing < (1u << size); ++failing) {
    const bool fails = (failing >> rank) & 1u;
    Seen value;
    try {
      value.value = agreed<UsageError>(comm, [&] {
        if (fails) throw DataError(failure_of(rank));
        return 7;
      });
    } catch (const UsageError& e) {
      value.threw = true;
      value.message = e.what();
    }
    check(value, failing, rank, size, facts, "agreed");
    facts.check(value.threw || value.value == 7, "agreed: the work's value was lost");

    Seen nothing;
    try {
      agreed(comm, [&] {
        if (fails) throw UsageError(failure_of(rank));
      });
    } catch (const AgreedError& e) {
      nothing.threw = true;
      nothing.message = e.what();
    }
    check(nothing, failing, rank, size, facts, "agreed, no value");

    Seen told;
    try {
      fail_together<AgreedError>(comm, fails ? failure_of(rank) : "");
    } catch (const AgreedError& e) {
      told.threw = true;
      told.message = e.what();
    }
    check(told, failing, rank, size, facts, "fail_together");
  }
  REQUIRE_ALL_RANKS(facts);
}
