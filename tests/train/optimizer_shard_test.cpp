// OptimizerShard's pure logic (optimizer_shard.hpp), exhaustively over small cases: for every
// N and rank the pieces are chunk `rank` of each bucket (schedule.hpp), laid end to end; the
// ranks' pieces tile every bucket exactly once; take() picks exactly those elements.
#include "ringtrain/framework/train/optimizer_shard.hpp"

#include <catch2/catch.hpp>
#include <numeric>

#include "ringtrain/collectives/buckets.hpp"
#include "ringtrain/collectives/schedule.hpp"

using namespace ringtrain;

TEST_CASE("the ranks' shards tile every bucket once, in the ring's chunk partition") {
  // Parameter sizes incl. one smaller than N (a bucket with empty chunks) and odd sizes.
  const std::vector<std::size_t> sizes = {30, 50, 250, 40, 70, 1, 3};
  for (const std::size_t cap_bytes : {std::size_t{4}, std::size_t{400}, std::size_t{1} << 20}) {
    const auto buckets = collectives::plan_buckets(sizes, cap_bytes);
    const std::size_t M = std::accumulate(sizes.begin(), sizes.end(), std::size_t{0});
    for (int N = 1; N <= 5; ++N) {
      std::vector<int> owners(M, 0);
      std::size_t elements = 0;
      for (int r = 0; r < N; ++r) {
        const OptimizerShard shard(buckets, M, N, r, /*sharded=*/true);
        REQUIRE(shard.pieces().size() == buckets.size());
        std::size_t next = 0;
        for (std::size_t b = 0; b < buckets.size(); ++b) {
          const ShardPiece& p = shard.pieces()[b];
          const auto E = buckets[b].elements;
          CHECK(p.flat_offset == buckets[b].offset + collectives::chunk_begin(E, N, r));
          CHECK(p.count == collectives::chunk_size(E, N, r));
          CHECK(p.shard_offset == next);
          next += p.count;
          for (std::size_t i = 0; i < p.count; ++i) ++owners[p.flat_offset + i];
        }
        CHECK(shard.elements() == next);
        elements += shard.elements();

        // take(): element i of the full buffer holds i, so the shard shows which it took.
        std::vector<float> full(M), mine(shard.elements());
        std::iota(full.begin(), full.end(), 0.0f);
        shard.take(full, mine);
        for (const ShardPiece& p : shard.pieces())
          for (std::size_t i = 0; i < p.count; ++i)
            CHECK(mine[p.shard_offset + i] == float(p.flat_offset + i));
      }
      CHECK(elements == M);
      CHECK(std::all_of(owners.begin(), owners.end(), [](int k) { return k == 1; }));
    }
  }
}

TEST_CASE("unsharded, the shard is the whole buffer at its own offsets") {
  const std::vector<std::size_t> sizes = {30, 50, 250};
  const auto buckets = collectives::plan_buckets(sizes, 400);
  const OptimizerShard shard(buckets, 330, 3, 1, /*sharded=*/false);
  CHECK(shard.elements() == 330);
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    CHECK(shard.pieces()[b].flat_offset == buckets[b].offset);
    CHECK(shard.pieces()[b].shard_offset == buckets[b].offset);
    CHECK(shard.pieces()[b].count == buckets[b].elements);
  }
  std::vector<float> full(330, 1.0f), small(329);
  CHECK_THROWS(shard.take(full, small));
}
