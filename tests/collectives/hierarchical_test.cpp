// The hierarchical allreduce under MPI at N = 1..4 with hosts of K = 1, 2, 3 consecutive ranks
// (N = 3, K = 2 and N = 4, K = 3 are uneven) and MPI's shared-memory grouping: the layout,
// exact sums, agreement with the flat ring, the same bits on every rank and every call,
// counters equal to the formula, async equal to blocking, a NaN seen, misuse refused; the
// two halves apart (ZeRO-1's): shards that partition the buffer, exact sums on them, the
// all-gather rebuilding the buffer, together the allreduce's bits, counters of the formula.
//
// Inputs for the comparisons with the flat ring are not integers (sin), so the two summation
// orders round differently and only the tolerance can hold; the exact-sum case uses
// integers, whose sums are exact in float.
#include <mpi.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "mpi_test.hpp"
#include "ringtrain/collectives/collectives.hpp"

using namespace ringtrain::collectives;
using ringtrain::testing::all_ranks;
using ringtrain::testing::Facts;

namespace {

// Every 97th element is -0.0f on every rank, so its sum is -0.0f: a gather that added +0.0f
// would turn it into +0.0f on some ranks only.
float rough(int rank, std::size_t i) {
  if (i % 97 == 13) return -0.0f;
  return static_cast<float>(std::sin(0.7 * rank + 0.013 * double(i)) * (1.0 + rank));
}

float whole(int rank, std::size_t i) {
  return static_cast<float>((rank + 1) * 1024 + static_cast<int>(i % 1021));
}

std::vector<float> inputs(float (*value)(int, std::size_t), int rank, std::size_t M) {
  std::vector<float> x(M);
  for (std::size_t i = 0; i < M; ++i) x[i] = value(rank, i);
  return x;
}

// Same length and the same bits (memcmp is not given the null data() of an empty vector).
bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Groupings to try: 0 (shared memory), then hosts of 1, 2 and 3 ranks.
constexpr int kGroupings[] = {0, 1, 2, 3};

std::vector<std::size_t> element_counts(int N) {
  const auto n = static_cast<std::size_t>(N);
  return {0, 1, n - 1, n + 1, 1000, 168, 70001};
}

RingOptions hierarchical_options(const Hierarchy& hierarchy) {
  RingOptions options;
  options.algorithm = Algorithm::kHierarchical;
  options.hierarchy = &hierarchy;
  options.segment_bytes = 8192;  // several segments per chunk at the larger sizes
  return options;
}

// The same value on every rank iff min == max of a 64-bit digest of the bits.
bool same_bits_on_all_ranks(const std::vector<float>& x) {
  std::uint64_t digest = 1469598103934665603ull;
  for (float v : x) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    digest = (digest ^ bits) * 1099511628211ull;
  }
  std::uint64_t low = 0, high = 0;
  MPI_Allreduce(&digest, &low, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&digest, &high, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  return low == high;
}

}  // namespace

TEST_CASE("Hierarchy: hosts of K consecutive ranks, L from the smallest host") {
  Communicator comm;
  const int N = comm.size(), r = comm.rank();
  Facts facts;
  for (int K = 1; K <= N + 1; ++K) {
    Hierarchy hierarchy(comm, K);
    const HostLayout& h = hierarchy.layout();
    const int hosts = (N + K - 1) / K;
    const int last_host = N - (hosts - 1) * K;
    facts.check(h.hosts == hosts, "K=" + std::to_string(K) + " hosts " + std::to_string(h.hosts));
    facts.check(h.host_chunks == std::min(K, last_host), "L " + std::to_string(h.host_chunks));
    facts.check(h.host_size == (r / K == hosts - 1 ? last_host : K), "host size");
    facts.check(h.local == r % K && hierarchy.host().rank() == r % K, "local index");
    facts.check(h.cross_rank == (h.core() ? r / K : -1), "cross rank");
    facts.check(h.core() == (hierarchy.cross() != nullptr), "cross ring of a core rank");
    if (hierarchy.cross()) facts.check(hierarchy.cross()->size() == hosts, "cross ring size");
  }
  Hierarchy node(comm, 0);  // the test runs on one machine: one host of N ranks
  facts.check(node.layout().hosts == 1 && node.layout().host_chunks == N, "shared-memory host");
  REQUIRE_ALL_RANKS(facts);
  REQUIRE_THROWS_AS(Hierarchy(comm, -1), CollectiveError);
}

TEST_CASE("hierarchical allreduce: exact sums, the flat ring's, same bits, exact counters") {
  Communicator comm;
  const int N = comm.size(), r = comm.rank();
  Facts facts;
  for (int K : kGroupings) {
    Hierarchy hierarchy(comm, K);
    const RingOptions options = hierarchical_options(hierarchy);
    for (std::size_t M : element_counts(N)) {
      const std::string where = "K=" + std::to_string(K) + " M=" + std::to_string(M);
      std::vector<float> exact = inputs(whole, r, M);
      allreduce_sum(comm, exact, options);
      for (std::size_t i = 0; i < M; ++i) {
        const float sum = static_cast<float>(512 * N * (N + 1) + N * static_cast<int>(i % 1021));
        if (!facts.check(exact[i] == sum, where + " integer sum wrong at " + std::to_string(i)))
          break;
      }
      std::vector<float> flat = inputs(rough, r, M), once = flat, twice = flat;
      allreduce_sum(comm, flat);
      const Counters c = allreduce_sum(comm, once, options);
      allreduce_sum(comm, twice, options);
      for (std::size_t i = 0; i < M; ++i) {
        double scale = 0.0;  // Σ_r |x_r[i]|: the size of the rounding either order makes
        for (int q = 0; q < N; ++q) scale += std::fabs(double(rough(q, i)));
        if (!facts.check(std::fabs(double(once[i]) - double(flat[i])) <= 1e-5 * scale,
                         where + " element " + std::to_string(i) + " differs from the ring"))
          break;
      }
      facts.check(bitwise_equal(once, twice),
                  where + " repeated call not bitwise identical");
      facts.check(all_ranks(same_bits_on_all_ranks(once)), where + " ranks' bits differ");
      facts.check(c == hierarchical_counters(M, hierarchy.layout()),
                  where + " counters differ from the formula");
    }
  }
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("hierarchical counters: the cost model's rounds and bytes") {
  Communicator comm;
  const int N = comm.size();
  Facts facts;
  for (int K : kGroupings) {
    Hierarchy hierarchy(comm, K);
    const HostLayout& h = hierarchy.layout();
    // A multiple of L·H: every chunk of every ring has the same size.
    const std::size_t M = 12 * static_cast<std::size_t>(h.host_chunks * h.hosts) * 7;
    std::vector<float> x(M, 1.0f);
    const Counters c = allreduce_sum(comm, x, hierarchical_options(hierarchy));
    const std::size_t L = std::size_t(h.host_chunks), H = std::size_t(h.hosts);
    const std::size_t P = std::size_t(h.host_size), bytes = M * sizeof(float);
    // Intra-host: a host of L ranks runs one ring (2(L-1) rounds, 2(L-1)/L · M); a larger
    // host two allreduces (4(P-1) rounds, 4(P-1)/P · M).
    const bool even = P == L;
    const std::size_t intra_rounds = even ? 2 * (L - 1) : 4 * (P - 1);
    const std::size_t intra_bytes = even ? 2 * (L - 1) * bytes / L : 4 * (P - 1) * bytes / P;
    // Inter-host, core ranks only: 2(H-1) rounds, 2(H-1)/H · M/L.
    const std::size_t inter_rounds = h.core() ? 2 * (H - 1) : 0;
    const std::size_t inter_bytes = h.core() ? 2 * (H - 1) * bytes / (L * H) : 0;
    const std::string where = "N=" + std::to_string(N) + " K=" + std::to_string(K);
    facts.check(c.inter_host_rounds == inter_rounds, where + " inter-host rounds");
    facts.check(c.inter_host_bytes_sent == inter_bytes, where + " inter-host bytes");
    facts.check(c.rounds == intra_rounds + inter_rounds, where + " rounds");
    facts.check(c.bytes_sent == intra_bytes + inter_bytes, where + " bytes sent");
    facts.check(c.bytes_received == c.bytes_sent, where + " bytes received");
  }
  REQUIRE_ALL_RANKS(facts);
}

// Σ over ranks of x (doubles), on every rank. Collective.
std::vector<double> sum_over_ranks(std::vector<double> x) {
  MPI_Allreduce(MPI_IN_PLACE, x.data(), static_cast<int>(x.size()), MPI_DOUBLE, MPI_SUM,
                MPI_COMM_WORLD);
  return x;
}

// A bf16 wire rounds on the cross-host ring only: with one host nothing is rounded; the
// inter-host bytes halve and the intra-host ones do not; the result is within the bf16 bound
// over H hosts of the fp32 one, with the same bits on every rank; this rank's residual is
// non-zero only inside its own host chunk, and with every rank's residual added back the
// sum is the exact one to fp32 accuracy (what error feedback relies on).
TEST_CASE("hierarchical with a bf16 wire: rounded between hosts only, residuals complete") {
  Communicator comm;
  const int N = comm.size(), r = comm.rank();
  const std::size_t M = 70001;
  Facts facts;
  for (int K : kGroupings) {
    Hierarchy hierarchy(comm, K);
    const HostLayout& h = hierarchy.layout();
    RingOptions options = hierarchical_options(hierarchy);
    std::vector<float> fp32 = inputs(rough, r, M), bf16 = fp32, residual(M, 0.0f);
    const Counters c32 = allreduce_sum(comm, fp32, options);
    options.wire = Wire::kBf16;
    AsyncAllreduce reduction;
    reduction.start(comm, bf16, options, Collective::kAllreduce, residual);
    const Counters c16 = reduction.wait();
    const std::string where = "N=" + std::to_string(N) + " K=" + std::to_string(K);
    facts.check(c16.inter_host_bytes_sent * 2 == c32.inter_host_bytes_sent,
                where + " inter-host bytes not halved");
    facts.check(c16.bytes_sent - c16.inter_host_bytes_sent ==
                    c32.bytes_sent - c32.inter_host_bytes_sent,
                where + " intra-host bytes changed");
    facts.check(all_ranks(same_bits_on_all_ranks(bf16)), where + " ranks' bits differ");
    const std::size_t L = std::size_t(h.host_chunks), l = std::size_t(h.local);
    const std::size_t begin = h.core() ? chunk_begin(M, L, l) : 0;
    const std::size_t end = h.core() ? begin + chunk_size(M, L, l) : 0;
    std::vector<double> losses(residual.begin(), residual.end());
    const std::vector<double> all_losses = sum_over_ranks(losses);
    const double bound = bf16_allreduce_error_bound(h.hosts);
    for (std::size_t i = 0; i < M; ++i) {
      double exact = 0.0, scale = 0.0;
      for (int q = 0; q < N; ++q) {
        exact += double(rough(q, i));
        scale += std::fabs(double(rough(q, i)));
      }
      const std::string at = where + " element " + std::to_string(i);
      if (!facts.check(residual[i] == 0.0f || (i >= begin && i < end),
                       at + ": a residual outside this rank's host chunk") ||
          !facts.check(h.hosts > 1 || (bf16[i] == fp32[i] && residual[i] == 0.0f),
                       at + ": one host, yet rounded") ||
          !facts.check(std::fabs(double(bf16[i]) - double(fp32[i])) <= (bound + 1e-5) * scale,
                       at + ": beyond the bf16 bound of the fp32 sum") ||
          !facts.check(std::fabs(double(bf16[i]) + all_losses[i] - exact) <= 1e-5 * scale,
                       at + ": result + residuals is not the exact sum"))
        break;
    }
  }
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("hierarchical AsyncAllreduce: start, progress, wait equals blocking, bitwise") {
  Communicator comm;
  const int r = comm.rank();
  Facts facts;
  AsyncAllreduce reduction;  // reused across groupings and sizes
  for (int K : kGroupings) {
    Hierarchy hierarchy(comm, K);
    const RingOptions options = hierarchical_options(hierarchy);
    for (std::size_t M : {std::size_t{0}, std::size_t{5}, std::size_t{70001}}) {
      std::vector<float> blocking = inputs(rough, r, M), async = blocking;
      const Counters expected = allreduce_sum(comm, blocking, options);
      reduction.start(comm, async, options);
      volatile double work = 0;
      while (!reduction.progress())  // "backward", polling in between
        for (int k = 0; k < 1000; ++k) work = work + k;
      const Counters c = reduction.wait();
      const std::string where = "K=" + std::to_string(K) + " M=" + std::to_string(M);
      facts.check(!reduction.active() && reduction.own_chunk_reduced(), where + " still active");
      facts.check(bitwise_equal(blocking, async),
                  where + " async differs from blocking");
      facts.check(c == expected, where + " counters differ");
      facts.check(!reduction.sum_not_finite(), where + " finite sum reported not finite");
    }
  }
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("hierarchical AsyncAllreduce: some rank sees a NaN of any rank's gradient") {
  Communicator comm;
  const int N = comm.size(), r = comm.rank();
  Facts facts;
  AsyncAllreduce reduction;
  for (int K : kGroupings) {
    Hierarchy hierarchy(comm, K);
    for (std::size_t at : {std::size_t{0}, std::size_t{500}, std::size_t{999}}) {
      std::vector<float> x = inputs(rough, r, 1000);
      if (r == N - 1) x[at] = std::numeric_limits<float>::quiet_NaN();
      reduction.start(comm, x, hierarchical_options(hierarchy));
      reduction.wait();
      int seen = reduction.sum_not_finite() ? 1 : 0, any = 0;
      MPI_Allreduce(&seen, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
      facts.check(N == 1 || any == 1, "K=" + std::to_string(K) + " NaN at " +
                                           std::to_string(at) + " seen by no rank");
      facts.check(std::isnan(x[at]), "the sum lost the NaN");
    }
  }
  REQUIRE_ALL_RANKS(facts);
}

namespace {

// The shards of all ranks for M elements, gathered: (begin, size) of rank q at 2q, 2q+1.
std::vector<unsigned long long> all_shards(std::size_t M, const HostLayout& layout, int N) {
  const ChunkRange mine = hierarchical_shard(M, layout);
  const unsigned long long pair[2] = {mine.begin, mine.size};
  std::vector<unsigned long long> shards(2 * static_cast<std::size_t>(N));
  MPI_Allgather(pair, 2, MPI_UNSIGNED_LONG_LONG, shards.data(), 2, MPI_UNSIGNED_LONG_LONG,
                MPI_COMM_WORLD);
  return shards;
}

// Shards that tile [0, M) in some order: sorted by begin, each starts where the last ended.
bool partition(std::vector<unsigned long long> shards, std::size_t M) {
  std::vector<std::pair<unsigned long long, unsigned long long>> ranges;
  for (std::size_t q = 0; q + 1 < shards.size(); q += 2)
    if (shards[q + 1] > 0) ranges.emplace_back(shards[q], shards[q + 1]);
  std::sort(ranges.begin(), ranges.end());
  unsigned long long end = 0;
  for (const auto& [begin, size] : ranges) {
    if (begin != end) return false;
    end = begin + size;
  }
  return end == M;
}

// ZeRO-1's way, one AsyncAllreduce running the halves with garbage outside this rank's shard
// in between, gives the allreduce's bits (rough inputs: the order of the sums shows).
bool halves_are_the_allreduce(const Communicator& comm, const RingOptions& options, std::size_t M) {
  std::vector<float> allreduced = inputs(rough, comm.rank(), M), halves = allreduced;
  allreduce_sum(comm, allreduced, options);
  AsyncAllreduce reduction;
  reduction.start(comm, halves, options, Collective::kReduceScatter);
  reduction.wait();
  const bool reduced = reduction.own_chunk_reduced();
  const ChunkRange mine = reduce_scatter_shard(M, comm.size(), comm.rank(), options);
  for (std::size_t i = 0; i < M; ++i)
    if (i < mine.begin || i >= mine.begin + mine.size) halves[i] = 12345.0f;
  reduction.start(comm, halves, options, Collective::kAllGather);
  reduction.wait();
  return reduced && bitwise_equal(halves, allreduced);
}

}  // namespace

TEST_CASE("hierarchical halves: reduce-scatter sums each rank's shard, all-gather spreads them") {
  Communicator comm;
  const int N = comm.size(), r = comm.rank();
  Facts facts;
  for (int K : kGroupings) {
    Hierarchy hierarchy(comm, K);
    const HostLayout& h = hierarchy.layout();
    const RingOptions options = hierarchical_options(hierarchy);
    for (std::size_t M : element_counts(N)) {
      const std::string where = "K=" + std::to_string(K) + " M=" + std::to_string(M);
      const ChunkRange mine = hierarchical_shard(M, h);
      facts.check(partition(all_shards(M, h, N), M), where + " shards do not partition [0, M)");
      facts.check(h.core() || mine.size == 0, where + " an extra rank has a shard");
      std::vector<float> x = inputs(whole, r, M);
      const Counters rs = reduce_scatter_sum(comm, x, options);
      for (std::size_t i = mine.begin; i < mine.begin + mine.size; ++i) {
        const float sum = static_cast<float>(512 * N * (N + 1) + N * static_cast<int>(i % 1021));
        if (!facts.check(x[i] == sum, where + " shard sum wrong at " + std::to_string(i))) break;
      }
      facts.check(rs == hierarchical_counters(M, h, Collective::kReduceScatter),
                  where + " reduce-scatter counters differ from the formula");
      // Each rank writes only its shard (values that say whose it is), over garbage.
      std::vector<float> y(M, float(1000 + r)), expected(M);
      for (std::size_t i = mine.begin; i < mine.begin + mine.size; ++i) y[i] = float(i % 4093);
      for (std::size_t i = 0; i < M; ++i) expected[i] = float(i % 4093);
      const Counters ag = all_gather(comm, y, options);
      facts.check(bitwise_equal(y, expected), where + " all-gather did not rebuild the buffer");
      facts.check(ag == hierarchical_counters(M, h, Collective::kAllGather),
                  where + " all-gather counters differ from the formula");
      facts.check(halves_are_the_allreduce(comm, options, M),
                  where + " halves differ from the allreduce");
    }
  }
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("hierarchical: misuse is refused on every rank before any data moves") {
  Communicator comm;
  Hierarchy hierarchy(comm, 2);
  std::vector<float> x(64, 1.0f);
  RingOptions options = hierarchical_options(hierarchy);
  AsyncAllreduce reduction;
  options.segments_in_flight = 0;  // invalid: the first phase refuses to start
  REQUIRE_THROWS_AS(reduction.start(comm, x, options), CollectiveError);
  REQUIRE(all_ranks(!reduction.active()));
  options.hierarchy = nullptr;
  REQUIRE_THROWS_AS(allreduce_sum(comm, x, options), CollectiveError);
  MPI_Comm copy = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &copy);
  {
    Communicator other(copy);
    REQUIRE_THROWS_AS(reduction.start(other, x, hierarchical_options(hierarchy)),
                      CollectiveError);
  }
  MPI_Comm_free(&copy);
  REQUIRE(all_ranks(!reduction.active()));
}
