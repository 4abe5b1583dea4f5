// The ring under MPI at N = 1..4: exact sums for element counts that do and do not divide by
// N, equality with MPI's own collectives, exact counters, bitwise repeatability, and the same
// clear error on every rank when sizes disagree.
//
// Inputs: x_r[i] = (r+1)·1024 + (i mod 1021), so Σ_r x_r[i] = 512·N(N+1) + N·(i mod 1021),
// exact in float (< 2^24). A chunk in the wrong place or a contribution missing or counted
// twice changes the sum.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "mpi_test.hpp"
#include "ringtrain/collectives/collectives.hpp"

using namespace ringtrain::collectives;
using ringtrain::testing::all_ranks;
using ringtrain::testing::Facts;

namespace {

float input(int rank, std::size_t i) {
  return static_cast<float>((rank + 1) * 1024 + static_cast<int>(i % 1021));
}

float expected_sum(int N, std::size_t i) {
  return static_cast<float>(512 * N * (N + 1) + N * static_cast<int>(i % 1021));
}

std::vector<float> inputs(int rank, std::size_t M) {
  std::vector<float> x(M);
  for (std::size_t i = 0; i < M; ++i) x[i] = input(rank, i);
  return x;
}

std::vector<std::size_t> element_counts(int N) {
  const auto n = static_cast<std::size_t>(N);
  std::vector<std::size_t> counts{0, 1, n - 1, n, n + 1, 1000, 65537, 1000 * n};
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

// Option sets exercised: the default, tiny segments with a short window (many segments per
// chunk, so pipelining across steps is exercised), the same with the window training uses
// when overlap is on (8; wider than the chunk's segments at the small sizes), one segment in
// flight, and MPI itself.
std::vector<std::pair<std::string, RingOptions>> option_sets(std::size_t M) {
  RingOptions tiny;
  tiny.segment_bytes = M <= 1000 ? 12 : 4096;
  tiny.segments_in_flight = 2;
  RingOptions wide = tiny;
  wide.segments_in_flight = 8;
  RingOptions single;
  single.segment_bytes = M <= 1000 ? 64 : 8192;
  single.segments_in_flight = 1;
  RingOptions mpi;
  mpi.algorithm = Algorithm::kMpi;
  return {{"default", RingOptions{}},
          {"tiny segments", tiny},
          {"tiny segments, 8 in flight", wide},
          {"one in flight", single},
          {"MPI", mpi}};
}

bool same_counters(const Counters& a, const Counters& b) {
  return a.rounds == b.rounds && a.bytes_sent == b.bytes_sent &&
         a.bytes_received == b.bytes_received;
}

}  // namespace

TEST_CASE("allreduce_sum: exact sums, counters, agreement with MPI_Allreduce") {
  Communicator comm;
  const int N = comm.size(), r = comm.rank();
  Facts facts;
  for (std::size_t M : element_counts(N)) {
    std::vector<float> oracle = inputs(r, M);
    if (N > 1 && M > 0)
      MPI_Allreduce(MPI_IN_PLACE, oracle.data(), static_cast<int>(M), MPI_FLOAT, MPI_SUM,
                    comm.handle());
    for (const auto& [name, options] : option_sets(M)) {
      std::vector<float> x = inputs(r, M);
      const Counters c = allreduce_sum(comm, x, options);
      const std::string what = "allreduce M=" + std::to_string(M) + " " + name;
      for (std::size_t i = 0; i < M; ++i)
        if (x[i] != expected_sum(N, i)) {
          facts.check(false, what + " element " + std::to_string(i) + " = " + std::to_string(x[i]));
          break;
        }
      facts.check(M == 0 || std::memcmp(x.data(), oracle.data(), M * sizeof(float)) == 0,
                  what + " differs from MPI_Allreduce");
      const Counters expected = options.algorithm == Algorithm::kMpi
                                    ? Counters{}
                                    : expected_counters(Collective::kAllreduce, M, N, r);
      facts.check(same_counters(c, expected), what + " counters");
    }
  }
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("allreduce_sum counters: N-1 rounds per phase, 2M(N-1)/N bytes when N divides M") {
  Communicator comm;
  const auto n = static_cast<std::size_t>(comm.size());
  const std::size_t M = 1000 * n;
  std::vector<float> x = inputs(comm.rank(), M);
  const Counters c = allreduce_sum(comm, x);
  const std::size_t bytes = 2 * M * (n - 1) / n * sizeof(float);
  REQUIRE(all_ranks(c.rounds == 2 * (n - 1) && c.bytes_sent == bytes && c.bytes_received == bytes));
}

TEST_CASE("reduce_scatter_sum: rank r owns the full sum of chunk r") {
  Communicator comm;
  const int N = comm.size(), r = comm.rank();
  const auto n = static_cast<std::size_t>(N), rank = static_cast<std::size_t>(r);
  Facts facts;
  for (std::size_t M : element_counts(N)) {
    for (const auto& [name, options] : option_sets(M)) {
      std::vector<float> x = inputs(r, M);
      const Counters c = reduce_scatter_sum(comm, x, options);
      const std::string what = "reduce_scatter M=" + std::to_string(M) + " " + name;
      const std::size_t begin = chunk_begin(M, n, rank), size = chunk_size(M, n, rank);
      for (std::size_t i = begin; i < begin + size; ++i)
        if (x[i] != expected_sum(N, i)) {
          facts.check(false, what + " element " + std::to_string(i));
          break;
        }
      if (options.algorithm == Algorithm::kRing)
        facts.check(same_counters(c, expected_counters(Collective::kReduceScatter, M, N, r)),
                    what + " counters");
    }
  }
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("all_gather: rank r contributes chunk r, everyone ends with everything") {
  Communicator comm;
  const int N = comm.size(), r = comm.rank();
  const auto n = static_cast<std::size_t>(N);
  Facts facts;
  for (std::size_t M : element_counts(N)) {
    for (const auto& [name, options] : option_sets(M)) {
      // Own chunk: the owner's inputs; elsewhere garbage that must be overwritten.
      std::vector<float> x(M, -1.0f);
      const std::size_t begin = chunk_begin(M, n, static_cast<std::size_t>(r));
      for (std::size_t i = begin; i < begin + chunk_size(M, n, static_cast<std::size_t>(r)); ++i)
        x[i] = input(r, i);
      const Counters c = all_gather(comm, x, options);
      const std::string what = "all_gather M=" + std::to_string(M) + " " + name;
      for (std::size_t owner = 0; owner < n; ++owner)
        for (std::size_t i = chunk_begin(M, n, owner);
             i < chunk_begin(M, n, owner) + chunk_size(M, n, owner); ++i)
          if (x[i] != input(static_cast<int>(owner), i)) {
            facts.check(false, what + " element " + std::to_string(i));
            owner = n;
            break;
          }
      if (options.algorithm == Algorithm::kRing)
        facts.check(same_counters(c, expected_counters(Collective::kAllGather, M, N, r)),
                    what + " counters");
    }
  }
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("repeated calls are bitwise identical, and identical on every rank") {
  Communicator comm;
  const std::size_t M = 65537;
  std::mt19937 rng(1234u + static_cast<unsigned>(comm.rank()));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> original(M);
  for (float& v : original) v = dist(rng);

  RingTransfer transfer;  // reused: the second call must plan nothing new and agree bit for bit
  RingOptions options;
  options.segment_bytes = 16384;
  std::vector<float> first = original, second = original;
  run_collective(transfer, comm, first, Collective::kAllreduce, options);
  run_collective(transfer, comm, second, Collective::kAllreduce, options);
  Facts facts;
  facts.check(std::memcmp(first.data(), second.data(), M * sizeof(float)) == 0,
              "two runs of the same allreduce differ");

  // Every rank holds the same bits: compare a checksum across ranks.
  std::uint64_t hash = 1469598103934665603ull;
  for (float v : first) {
    std::uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    hash = (hash ^ bits) * 1099511628211ull;
  }
  std::uint64_t lo = 0, hi = 0;
  allreduce_min_max(comm, hash, lo, hi);
  facts.check(lo == hi, "ranks hold different sums");

  // And it is the sum, to float accuracy (the order differs from MPI's).
  std::vector<float> oracle = original;
  MPI_Allreduce(MPI_IN_PLACE, oracle.data(), static_cast<int>(M), MPI_FLOAT, MPI_SUM,
                comm.handle());
  for (std::size_t i = 0; i < M; ++i)
    if (!facts.check(std::abs(first[i] - oracle[i]) <= 1e-5f,
                     "element " + std::to_string(i) + " is not MPI_Allreduce's sum"))
      break;
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("ranks whose sizes disagree all raise the same clear error, and the ring still works") {
  Communicator comm;
  const int N = comm.size(), r = comm.rank();
  if (N == 1) return;  // nobody to disagree with
  const std::size_t M = 100 + (r == N - 1 ? 1 : 0);
  std::vector<float> x = inputs(r, M);
  const std::vector<float> untouched = x;
  std::string message;
  bool threw = false;
  try {
    allreduce_sum(comm, x);
  } catch (const CollectiveError& e) {
    threw = true;
    message = e.what();
  }
  Facts facts;
  facts.check(threw, "no CollectiveError on size mismatch");
  facts.check(message.find("different lengths") != std::string::npos &&
                  message.find("rank 0: 100") != std::string::npos &&
                  message.find("rank " + std::to_string(N - 1) + ": 101") != std::string::npos &&
                  message.find("allreduce_sum") != std::string::npos,
              "unclear message: " + message);
  facts.check(x == untouched, "data moved before the size check");

  // The same message on every rank.
  std::uint64_t h = std::hash<std::string>{}(message), lo = 0, hi = 0;
  allreduce_min_max(comm, h, lo, hi);
  facts.check(lo == hi, "ranks raised different messages");

  // The other entry points check too.
  int raised = 0;
  try {
    reduce_scatter_sum(comm, x);
  } catch (const CollectiveError&) {
    ++raised;
  }
  try {
    all_gather(comm, x);
  } catch (const CollectiveError&) {
    ++raised;
  }
  try {
    broadcast(comm, x, 0);
  } catch (const CollectiveError&) {
    ++raised;
  }
  std::vector<double> d(static_cast<std::size_t>(1 + (r == 0)));
  try {
    allreduce_sum(comm, std::span<double>(d));
  } catch (const CollectiveError&) {
    ++raised;
  }
  facts.check(raised == 4, "not every entry point checked sizes");

  // Nothing is left in flight: a correct call afterwards works.
  std::vector<float> y = inputs(r, 1000);
  allreduce_sum(comm, y);
  for (std::size_t i = 0; i < y.size(); ++i)
    if (!facts.check(y[i] == expected_sum(N, i),
                     "a correct call after the refusals: element " + std::to_string(i)))
      break;
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("broadcast from every root") {
  Communicator comm;
  const int N = comm.size(), r = comm.rank();
  Facts facts;
  for (int root = 0; root < N; ++root)
    for (std::size_t M : element_counts(N))
      for (const auto& [name, options] : option_sets(M)) {
        std::vector<float> x = r == root ? inputs(root, M) : std::vector<float>(M, -7.0f);
        broadcast(comm, x, root, options);
        facts.check(x == inputs(root, M), "broadcast root " + std::to_string(root) +
                                              " M=" + std::to_string(M) + " " + name);
      }
  bool threw = false;
  std::vector<float> x(4);
  try {
    broadcast(comm, x, N);
  } catch (const CollectiveError&) {
    threw = true;
  }
  facts.check(threw, "no CollectiveError for a root outside the communicator");
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("every wait policy gives the same answer") {
  Communicator comm;
  const int N = comm.size(), r = comm.rank();
  Facts facts;
  for (WaitPolicy p : {WaitPolicy::kSpin, WaitPolicy::kYield, WaitPolicy::kSleep}) {
    RingOptions options;
    options.wait = p;
    options.segment_bytes = 4096;
    std::vector<float> x = inputs(r, 5003);
    allreduce_sum(comm, x, options);
    for (std::size_t i = 0; i < x.size(); ++i)
      if (!facts.check(x[i] == expected_sum(N, i),
                       "wait policy " + std::to_string(int(p)) + ": element " + std::to_string(i)))
        break;
  }
  REQUIRE_ALL_RANKS(facts);
  REQUIRE(parse_wait_policy("yield") == WaitPolicy::kYield);
  REQUIRE_THROWS_AS(parse_wait_policy("nap"), CollectiveError);
  REQUIRE(resolve_wait_policy(WaitPolicy::kAuto, comm) ==
          (comm.ranks_per_node() > available_cores() ? WaitPolicy::kYield : WaitPolicy::kSpin));
}

TEST_CASE("invalid options are refused before anything moves") {
  Communicator comm;
  std::vector<float> x(10);
  RingOptions bad;
  bad.segment_bytes = 2;
  bool threw = false;
  try {
    allreduce_sum(comm, x, bad);
  } catch (const CollectiveError&) {
    threw = true;
  }
  REQUIRE(all_ranks(threw));
}
