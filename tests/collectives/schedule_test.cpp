// The ring's pure schedule, exhaustively: chunk partition, per-step chunks, and a symbolic
// run of the whole ring that tracks which ranks' contributions each chunk holds.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "ringtrain/collectives/schedule.hpp"

using namespace ringtrain::collectives;

TEST_CASE("chunk partition: contiguous, sizes differ by at most one, larger first") {
  for (std::size_t N = 1; N <= 17; ++N) {
    for (std::size_t M = 0; M <= 300; ++M) {
      std::size_t expected_begin = 0;
      for (std::size_t i = 0; i < N; ++i) {
        REQUIRE(chunk_begin(M, N, i) == expected_begin);
        const std::size_t s = chunk_size(M, N, i);
        REQUIRE((s == M / N || s == M / N + 1));
        if (i > 0) REQUIRE(s <= chunk_size(M, N, i - 1));
        expected_begin += s;
      }
      REQUIRE(expected_begin == M);
    }
  }
}

TEST_CASE("chunk partition: worked examples") {
  CHECK(chunk_size(10, 4, 0) == 3);
  CHECK(chunk_size(10, 4, 1) == 3);
  CHECK(chunk_size(10, 4, 2) == 2);
  CHECK(chunk_begin(10, 4, 3) == 8);
  CHECK(chunk_size(2, 4, 1) == 1);
  CHECK(chunk_size(2, 4, 2) == 0);
  CHECK(chunk_begin(2, 4, 3) == 2);
  CHECK(chunk_size(65537, 3, 0) == 21846);
  CHECK(chunk_size(65537, 3, 2) == 21845);
}

TEST_CASE("neighbours and step ranges") {
  CHECK(ring_right(3, 4) == 0);
  CHECK(ring_left(0, 4) == 3);
  CHECK(ring_left(0, 1) == 0);
  CHECK(first_step(Collective::kAllGather, 4) == 3);
  CHECK(num_steps(Collective::kAllreduce, 4) == 6);
  CHECK(num_steps(Collective::kReduceScatter, 1) == 0);
}

TEST_CASE("the 4-rank transfer table of ring.hpp") {
  // {send, recv} per (step, rank), copied from the essay.
  const int table[6][4][2] = {
      {{3, 2}, {0, 3}, {1, 0}, {2, 1}}, {{2, 1}, {3, 2}, {0, 3}, {1, 0}},
      {{1, 0}, {2, 1}, {3, 2}, {0, 3}}, {{0, 3}, {1, 0}, {2, 1}, {3, 2}},
      {{3, 2}, {0, 3}, {1, 0}, {2, 1}}, {{2, 1}, {3, 2}, {0, 3}, {1, 0}}};
  for (int t = 0; t < 6; ++t)
    for (int r = 0; r < 4; ++r) {
      CHECK(send_chunk(r, t, 4) == static_cast<std::size_t>(table[t][r][0]));
      CHECK(recv_chunk(r, t, 4) == static_cast<std::size_t>(table[t][r][1]));
    }
}

TEST_CASE("every step: what I receive is what my left neighbour sends, and I forward it next") {
  for (int N = 1; N <= 16; ++N)
    for (int t = 0; t < 2 * (N - 1); ++t) {
      std::vector<int> sent(static_cast<std::size_t>(N), 0);
      for (int r = 0; r < N; ++r) {
        REQUIRE(recv_chunk(r, t, N) == send_chunk(ring_left(r, N), t, N));
        REQUIRE(recv_chunk(r, t, N) == send_chunk(r, t + 1, N));
        REQUIRE(recv_chunk(r, t, N) != send_chunk(r, t, N));
        ++sent[send_chunk(r, t, N)];
      }
      for (int count : sent) REQUIRE(count == 1);  // each chunk travels once per step
    }
}

// Symbolic ring: holds[r][c] is the set (bitmask) of ranks whose contribution rank r's copy of
// chunk c contains. Reduce-scatter steps add disjoint sets; all-gather steps overwrite.
TEST_CASE("symbolic ring: reduce-scatter leaves the full sum of chunk r on rank r, all-gather "
          "spreads it, nothing is counted twice") {
  for (int N = 1; N <= 16; ++N) {
    const auto n = static_cast<std::size_t>(N);
    const std::uint32_t everyone = (N == 32 ? ~0u : (1u << N) - 1);
    std::vector<std::vector<std::uint32_t>> holds(n, std::vector<std::uint32_t>(n));
    for (std::size_t r = 0; r < n; ++r)
      for (std::size_t c = 0; c < n; ++c) holds[r][c] = 1u << r;

    for (int t = 0; t < 2 * (N - 1); ++t) {
      auto before = holds;  // all sends of a step read the state before the step
      for (int r = 0; r < N; ++r) {
        const int left = ring_left(r, N);
        const std::size_t c = recv_chunk(r, t, N);
        const std::uint32_t incoming = before[static_cast<std::size_t>(left)][c];
        auto& mine = holds[static_cast<std::size_t>(r)][c];
        if (step_reduces(t, N)) {
          REQUIRE((mine & incoming) == 0u);
          mine |= incoming;
        } else {
          REQUIRE(incoming == everyone);  // all-gather only forwards finished sums
          mine = incoming;
        }
      }
      if (t == N - 2)
        for (std::size_t r = 0; r < n; ++r) REQUIRE(holds[r][r] == everyone);
    }
    for (std::size_t r = 0; r < n; ++r)
      for (std::size_t c = 0; c < n; ++c) REQUIRE(holds[r][c] == everyone);
  }
}

TEST_CASE("all-gather alone: rank r contributes chunk r") {
  for (int N = 1; N <= 16; ++N) {
    const auto n = static_cast<std::size_t>(N);
    std::vector<std::vector<int>> owner(n, std::vector<int>(n, -1));
    for (std::size_t r = 0; r < n; ++r) owner[r][r] = static_cast<int>(r);
    const int first = first_step(Collective::kAllGather, N);
    for (int t = first; t < first + num_steps(Collective::kAllGather, N); ++t) {
      auto before = owner;
      for (int r = 0; r < N; ++r) {
        const std::size_t c = recv_chunk(r, t, N);
        const int from = before[static_cast<std::size_t>(ring_left(r, N))][c];
        REQUIRE(from == static_cast<int>(c));  // only ever forwards the owner's chunk
        owner[static_cast<std::size_t>(r)][c] = from;
      }
    }
    for (std::size_t r = 0; r < n; ++r)
      for (std::size_t c = 0; c < n; ++c) REQUIRE(owner[r][c] == static_cast<int>(c));
  }
}

TEST_CASE("segments") {
  CHECK(segment_elements(0) == 1);
  CHECK(segment_elements(256 * 1024) == 65536);
  CHECK(num_segments(0, 4) == 0);
  CHECK(num_segments(1, 4) == 1);
  CHECK(num_segments(8, 4) == 2);
  CHECK(num_segments(9, 4) == 3);
}

TEST_CASE("expected counters: 2M(N-1)/N bytes when N divides M, exact otherwise") {
  for (int N = 1; N <= 9; ++N) {
    const auto n = static_cast<std::size_t>(N);
    for (std::size_t M : {std::size_t{0}, std::size_t{1}, n - 1, n, n + 1, std::size_t{1000},
                          std::size_t{65537}, 1000 * n}) {
      std::size_t sent_total = 0, received_total = 0;
      for (int r = 0; r < N; ++r) {
        const Counters all = expected_counters(Collective::kAllreduce, M, N, r);
        const Counters rs = expected_counters(Collective::kReduceScatter, M, N, r);
        const Counters ag = expected_counters(Collective::kAllGather, M, N, r);
        REQUIRE(all.bytes_sent == rs.bytes_sent + ag.bytes_sent);
        REQUIRE(all.rounds == (N > 1 && M > 0 ? 2 * n - 2 : 0));
        REQUIRE(rs.rounds == (N > 1 && M > 0 ? n - 1 : 0));
        if (M % n == 0) {
          REQUIRE(all.bytes_sent == 2 * M * (n - 1) / n * sizeof(float));
          REQUIRE(all.bytes_received == all.bytes_sent);
        }
        // Each rank sends every chunk but the one it ends up owning, in each phase:
        // reduce-scatter skips chunk r, all-gather skips chunk r+1.
        REQUIRE(rs.bytes_sent == (M - chunk_size(M, n, static_cast<std::size_t>(r))) *
                                     sizeof(float) * (N > 1));
        sent_total += all.bytes_sent;
        received_total += all.bytes_received;
      }
      REQUIRE(sent_total == received_total);
    }
  }
}
