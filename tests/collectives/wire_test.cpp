// The ring with bf16 on the wire, at N = 1..4: every rank's result and rounding residual are
// the bits of the ring's chain done serially (ring_transfer.hpp:
// s_1 = x_{c+1}, s_k = bf(s_{k-1}) + x_{c+k}, result bf(s_N)), for the allreduce and for each
// half, with segments that pipeline; every rank ends with the same bits; counters are half
// the fp32 ones; the fp32 wire is still the serial chain without rounding, bit for bit; the
// error against an fp64 sum stays within bf16_allreduce_error_bound(N); AsyncAllreduce gives
// the blocking bits; MPI's own collectives refuse a bf16 wire.
//
// Inputs x_r[i] (random_floats.hpp) differ by rank and position.
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "mpi_test.hpp"
#include "random_floats.hpp"
#include "ringtrain/collectives/collectives.hpp"

using namespace ringtrain::collectives;
using ringtrain::testing::Facts;

namespace {

float input(int rank, std::size_t i) {
  return ringtrain::testing::random_float(static_cast<std::uint64_t>(rank) << 40 ^ i ^ 0x5eed);
}

std::vector<float> inputs(int rank, std::size_t M) {
  std::vector<float> x(M);
  for (std::size_t i = 0; i < M; ++i) x[i] = input(rank, i);
  return x;
}

float loss(float value) {
  const float rounded = round_to_bf16(value);
  return std::isfinite(rounded) ? value - rounded : 0.0f;
}

constexpr float kUntouched = 7.0f;  // residual elements a rank never rounds keep it

// Rank r's buffer and residual after `which` with the ring's summation order done serially.
// Elements of a reduce-scatter outside rank r's chunk are left as they were (unspecified).
struct Expected {
  std::vector<float> data, residual;
};

Expected emulate(Collective which, Wire wire, int N, int r, std::size_t M) {
  Expected e{inputs(r, M), std::vector<float>(M, kUntouched)};
  if (N == 1) return e;
  const bool bf16 = wire == Wire::kBf16;
  auto bf = [&](float v) { return bf16 ? round_to_bf16(v) : v; };
  for (int c = 0; c < N; ++c) {
    const auto chunk = static_cast<std::size_t>(c);
    const int k_of_r = (r - c + N) % N;  // r's place in chunk c's chain, 0: the owner
    for (std::size_t i = chunk_begin(M, N, chunk);
         i < chunk_begin(M, N, chunk) + chunk_size(M, N, chunk); ++i) {
      if (which == Collective::kAllGather) {
        e.data[i] = bf(input(c, i));
        if (bf16 && c == r) e.residual[i] = loss(input(c, i));
        continue;
      }
      float s = input((c + 1) % N, i);
      for (int k = 2; k <= N; ++k) {
        if (bf16 && k - 1 == k_of_r) e.residual[i] = loss(s);
        s = bf(s) + input((c + k) % N, i);
      }
      if (which == Collective::kReduceScatter) {
        if (c == r) e.data[i] = s;
        continue;
      }
      if (bf16 && k_of_r == 0) e.residual[i] = loss(s);
      e.data[i] = bf(s);
    }
  }
  return e;
}

bool same_bits(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i])) return false;
  return true;
}

// Every rank holds what rank 0 holds.
bool same_on_all_ranks(const Communicator& comm, std::vector<float> data) {
  std::vector<float> root = data;
  MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_FLOAT, 0, comm.handle());
  return same_bits(root, data);
}

std::vector<std::pair<std::string, RingOptions>> option_sets(std::size_t M, Wire wire) {
  RingOptions plain;
  plain.wire = wire;
  RingOptions tiny = plain;
  tiny.segment_bytes = M <= 1000 ? 12 : 4096;
  RingOptions single = plain;
  single.segment_bytes = M <= 1000 ? 64 : 8192;
  single.segments_in_flight = 1;
  return {{"default", plain}, {"tiny segments", tiny}, {"one in flight", single}};
}

const char* name(Collective which) {
  return which == Collective::kAllreduce       ? "allreduce"
         : which == Collective::kReduceScatter ? "reduce-scatter"
                                               : "all-gather";
}

// One collective on a fresh buffer, checked against the emulation.
void check_against_chain(const Communicator& comm, Collective which, std::size_t M,
                         const std::string& label, const RingOptions& options, Facts& facts) {
  const int N = comm.size(), r = comm.rank();
  const Expected expected = emulate(which, options.wire, N, r, M);
  std::vector<float> data = inputs(r, M), residual(M, kUntouched);
  RingTransfer transfer;
  transfer.start(comm, data, which, options, residual);
  const Counters counters = transfer.wait(options.wait);
  const std::string what = std::string(name(which)) + " M=" + std::to_string(M) + " " + label;
  const std::size_t begin = chunk_begin(M, N, static_cast<std::size_t>(r));
  const std::size_t size = chunk_size(M, N, static_cast<std::size_t>(r));
  if (which == Collective::kReduceScatter)
    facts.check(same_bits(std::span(data).subspan(begin, size),
                          std::span(expected.data).subspan(begin, size)),
                what + ": own chunk is not the serial chain's bits");
  else
    facts.check(same_bits(data, expected.data), what + ": result is not the serial chain's bits");
  facts.check(same_bits(residual, expected.residual), what + ": residual differs from the chain's");
  if (which != Collective::kReduceScatter)
    facts.check(same_on_all_ranks(comm, data), what + ": ranks hold different bits");
  const Counters full = expected_counters(which, M, N, r);
  const std::size_t divisor = options.wire == Wire::kBf16 ? 2 : 1;
  facts.check(counters.rounds == full.rounds && counters.bytes_sent * divisor == full.bytes_sent &&
                  counters.bytes_received * divisor == full.bytes_received,
              what + ": counters are not the wire's bytes");
}

}  // namespace

TEST_CASE("wire: each rank's bits and residual are the ring's chain done serially") {
  Communicator comm;
  const auto n = static_cast<std::size_t>(comm.size());
  Facts facts;
  for (Wire wire : {Wire::kBf16, Wire::kFp32})
    for (Collective which :
         {Collective::kAllreduce, Collective::kReduceScatter, Collective::kAllGather})
      for (std::size_t M : {std::size_t{0}, std::size_t{1}, n + 1, std::size_t{1000}, 9000 * n + 3})
        for (const auto& [label, options] : option_sets(M, wire))
          check_against_chain(comm, which, M, (wire == Wire::kBf16 ? "bf16 " : "fp32 ") + label,
                              options, facts);
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("wire: the bf16 allreduce stays within the header's bound of the fp64 sum") {
  Communicator comm;
  const int N = comm.size(), r = comm.rank();
  const std::size_t M = 20000;
  RingOptions options;
  options.wire = Wire::kBf16;
  std::vector<float> data = inputs(r, M);
  allreduce_sum(comm, data, options);
  const double bound = bf16_allreduce_error_bound(N);
  double worst = 0;              // the largest |error| / Σ|x| seen
  std::size_t rounded_away = 0;  // elements where the result is not the fp32 sum
  for (std::size_t i = 0; i < M; ++i) {
    double exact = 0, magnitude = 0;
    float fp32 = 0;
    for (int q = 0; q < N; ++q) {
      exact += input(q, i);
      magnitude += std::fabs(input(q, i));
      fp32 += input(q, i);
    }
    worst = std::max(worst, std::fabs(data[i] - exact) / magnitude);
    rounded_away += data[i] != fp32;
  }
  Facts facts;
  facts.check(worst <= bound, "error " + std::to_string(worst) + " · Σ|x| exceeds the bound " +
                                  std::to_string(bound) + " · Σ|x|");
  if (N > 1)
    facts.check(rounded_away > M / 2,
                "only " + std::to_string(rounded_away) +
                    " results differ from the fp32 sum: is bf16 on the wire?");
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("wire: AsyncAllreduce gives the blocking bits; MPI refuses a bf16 wire") {
  Communicator comm;
  const int r = comm.rank();
  RingOptions options;
  options.wire = Wire::kBf16;
  options.segment_bytes = 4096;
  std::vector<float> blocking = inputs(r, 30001), async = blocking;
  allreduce_sum(comm, blocking, options);
  AsyncAllreduce reduction;
  reduction.start(comm, async, options);
  while (!reduction.progress()) {
  }
  Facts facts;
  facts.check(same_bits(blocking, async), "AsyncAllreduce differs from allreduce_sum");
  options.algorithm = Algorithm::kMpi;
  bool refused = false;
  try {
    allreduce_sum(comm, async, options);
  } catch (const CollectiveError&) {
    refused = true;
  }
  facts.check(refused, "Algorithm::kMpi accepted Wire::kBf16");
  REQUIRE_ALL_RANKS(facts);
}
