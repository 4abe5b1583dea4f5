// The split of the global batch by measured speed (train/step/batch_split.hpp), without MPI:
// worked examples, every split within the bounds as the oracle of the least predicted time
// at N = 1..4, the near-equal split as the oracle of equal speeds, the bounds, the
// hysteresis, unknown speeds, refusals.
#include "train/step/batch_split.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <numeric>

#include "ringtrain/framework/data/sampler.hpp"
#include "ringtrain/framework/error.hpp"

using namespace ringtrain;

namespace {

// A request over speeds with no floor, no binding cap, m = 1 and the near-equal split in force.
SplitRequest request(std::size_t global_batch, std::vector<double> speeds) {
  SplitRequest q;
  q.global_batch = global_batch;
  q.floors.assign(speeds.size(), 0);
  q.cap = global_batch;
  q.current = data::near_equal_split(global_batch, speeds.size());
  q.speeds = std::move(speeds);
  q.margin = 0.0;
  return q;
}

std::vector<std::size_t> split_of(const SplitRequest& q) {
  return decide_split(q).split;
}

using Split = std::vector<std::size_t>;

}  // namespace

TEST_CASE("batch split: shares proportional to speed", "[batch_split]") {
  CHECK(split_of(request(4, {1.0, 3.0})) == Split{1, 3});
  CHECK(split_of(request(12, {1.0, 2.0, 3.0})) == Split{2, 4, 6});
  CHECK(split_of(request(10, {4.0, 1.0})) == Split{8, 2});
  // The 1-and-3 example: the even split waits 2 s for rank 0, the proportional one 1 s.
  const SplitDecision d = decide_split(request(4, {1.0, 3.0}));
  CHECK(d.changed);
  CHECK(d.current_step_s == 2.0);
  CHECK(d.proposed_step_s == 1.0);
}

TEST_CASE("batch split: N = 1..4, the least predicted time of all splits within the bounds",
          "[batch_split]") {
  const std::vector<double> table{1.0, 2.5, 0.7, 10.0};
  struct Bounds {
    std::vector<std::size_t> floors;  // in units of m, per rank (first N used)
    std::size_t cap_units;            // 0: none
  };
  const std::vector<Bounds> bounds{
      {{0, 0, 0, 0}, 0}, {{1, 0, 2, 0}, 0}, {{0, 0, 0, 0}, 4}, {{1, 1, 0, 1}, 5}};
  std::size_t cases = 0;
  for (std::size_t n = 1; n <= 4; ++n)
    for (std::size_t m : {std::size_t{1}, std::size_t{3}})
      for (const Bounds& bound : bounds)
        for (std::size_t units = 0; units <= 12; ++units) {
          SplitRequest q = request(units * m, {table.begin(), table.begin() + std::ptrdiff_t(n)});
          q.micro_batch = m;
          q.current.assign(n, 0);  // sums to 0, not B: replaced whatever its time
          std::vector<std::size_t> lo(n), hi(n, units);
          for (std::size_t r = 0; r < n; ++r) {
            lo[r] = bound.floors[r];
            q.floors[r] = lo[r] * m;
            if (bound.cap_units > 0) hi[r] = std::min(units, bound.cap_units);
          }
          q.cap = (bound.cap_units > 0 ? bound.cap_units : units) * m;
          // The oracle: every split of `units` within [lo, hi], counted like an odometer.
          double best_s = std::numeric_limits<double>::infinity();
          Split split(lo);
          bool more = true;
          for (std::size_t r = 0; r < n; ++r) more = more && lo[r] <= hi[r];
          while (more) {
            if (std::accumulate(split.begin(), split.end(), std::size_t{0}) == units) {
              Split samples(split);
              for (std::size_t& b : samples) b *= m;
              best_s = std::min(best_s, predicted_step_s(samples, q.speeds, 0.0));
            }
            std::size_t r = 0;
            while (r < n && split[r] == hi[r]) split[r] = lo[r], ++r;
            more = r < n;
            if (more) ++split[r];
          }
          INFO("N = " << n << ", m = " << m << ", units " << units << ", cap units "
                      << bound.cap_units << ", floor of rank 0 " << lo[0]);
          if (!(best_s < std::numeric_limits<double>::infinity())) {
            CHECK_THROWS_AS(decide_split(q), UsageError);  // no split within the bounds
            continue;
          }
          const Split got = split_of(q);
          ++cases;
          REQUIRE(got.size() == n);
          CHECK(std::accumulate(got.begin(), got.end(), std::size_t{0}) == units * m);
          for (std::size_t r = 0; r < n; ++r) {
            CHECK(got[r] % m == 0);
            CHECK(got[r] >= q.floors[r]);
            CHECK(got[r] <= q.cap);
          }
          CHECK(predicted_step_s(got, q.speeds, 0.0) == Approx(best_s).epsilon(1e-12));
        }
  CHECK(cases > 300);
}

TEST_CASE("batch split: the unit left over goes where it adds the least time", "[batch_split]") {
  // Shares 0.55 and 5.45: the largest remainder would give 1,5 (1 s); 0,6 takes 0.6 s.
  CHECK(split_of(request(6, {1.0, 10.0})) == Split{0, 6});
}

TEST_CASE("batch split: equal speeds give the near-equal split, ties to the lower rank",
          "[batch_split]") {
  for (std::size_t n = 1; n <= 4; ++n)
    for (std::size_t b = 0; b <= 21; ++b) {
      SplitRequest q = request(b, std::vector<double>(n, 7.0));
      q.current.assign(n, 0);  // replaced whatever its time
      INFO("N = " << n << ", B = " << b);
      CHECK(split_of(q) == data::near_equal_split(b, n));
    }
  // Ranks 0 and 2 have the same remainder (1.5 each): the unit left over goes to rank 0.
  SplitRequest q = request(6, {1.0, 2.0, 1.0});
  q.current = {0, 0, 0};  // replaced, though 2,3,1 is no faster than 2,2,2
  CHECK(split_of(q) == Split{2, 3, 1});
}

TEST_CASE("batch split: whole micro-batches", "[batch_split]") {
  SplitRequest q = request(64, {1.0, 3.0});
  q.micro_batch = 16;
  CHECK(split_of(q) == Split{16, 48});
  // Four micro-batches over three equal ranks: 1 1/3 each, the extra one to rank 0.
  q = request(64, {5.0, 5.0, 5.0});
  q.micro_batch = 16;
  q.current = {0, 0, 0};
  CHECK(split_of(q) == Split{32, 16, 16});
  // 16,16,32 is as fast as 32,16,16: kept.
  q.current = {16, 16, 32};
  CHECK(split_of(q) == Split{16, 16, 32});
}

TEST_CASE("batch split: floors", "[batch_split]") {
  SplitRequest q = request(8, {1.0, 100.0});
  CHECK(split_of(q) == Split{0, 8});
  q.floors = {2, 0};
  CHECK(split_of(q) == Split{2, 6});
  // A floor counts in whole micro-batches: 3 samples with m = 2 is at least 4.
  q.micro_batch = 2;
  q.floors = {3, 0};
  CHECK(split_of(q) == Split{4, 4});
}

TEST_CASE("batch split: the cap", "[batch_split]") {
  SplitRequest q = request(8, {1.0, 100.0});
  q.cap = 5;
  CHECK(split_of(q) == Split{3, 5});
  // The cap counts in whole micro-batches: 5 samples with m = 2 is at most 4.
  q.micro_batch = 2;
  q.current = {4, 4};
  CHECK(split_of(q) == Split{4, 4});
  // Ranks 1 and 2 are capped, rank 0 takes the rest though it is the slowest.
  q = request(12, {1.0, 10.0, 10.0});
  q.cap = 4;
  q.current = {4, 4, 4};
  q.floors = {0, 0, 0};
  CHECK(split_of(q) == Split{4, 4, 4});
  q.cap = 5;
  CHECK(split_of(q) == Split{2, 5, 5});
}

TEST_CASE("batch split: hysteresis keeps a split that is nearly as good", "[batch_split]") {
  // Even split 50,50: t = 50 s. Proposal 49,51: t = max(49, 51/1.04) = 49.04 s, 1.9 % better.
  SplitRequest q = request(100, {1.0, 1.04});
  q.margin = 0.05;
  SplitDecision d = decide_split(q);
  CHECK_FALSE(d.changed);
  CHECK(d.split == Split{50, 50});
  CHECK(d.current_step_s == 50.0);
  CHECK(d.proposed_step_s == Approx(51.0 / 1.04));
  q.margin = 0.01;
  CHECK(decide_split(q).split == Split{49, 51});
  // Speeds 1 and 1.2: proposal 45,55 takes 45.83 s, 8.3 % better than 50 s: taken.
  q = request(100, {1.0, 1.2});
  q.margin = 0.05;
  CHECK(decide_split(q).split == Split{45, 55});
  // The same gain with 100 s of communication in both is 2.8 % of the step: kept.
  q.comm_s = 100.0;
  d = decide_split(q);
  CHECK_FALSE(d.changed);
  CHECK(d.split == Split{50, 50});
  CHECK(d.current_step_s == 150.0);
}

TEST_CASE("batch split: a current split the bounds do not allow is replaced", "[batch_split]") {
  SplitRequest q = request(4, {1.0, 1.0});
  q.margin = 0.5;
  q.micro_batch = 2;
  q.current = {3, 1};  // not whole micro-batches
  CHECK(split_of(q) == Split{2, 2});
  q.micro_batch = 1;
  q.current = {1, 2};  // sums to 3, not B
  CHECK(split_of(q) == Split{2, 2});
  q.current = {1, 3};
  q.floors = {2, 0};  // below rank 0's floor
  CHECK(split_of(q) == Split{2, 2});
}

TEST_CASE("batch split: unknown speeds are planned at the mean of the known ones",
          "[batch_split]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(planned_speeds({0.0, 2.0, 4.0}) == std::vector<double>{3.0, 2.0, 4.0});
  CHECK(planned_speeds({nan, -1.0, inf}) == std::vector<double>{1.0, 1.0, 1.0});
  // Planned 3, 2, 4: shares 4, 2.67, 5.33; the unit left over to rank 1 (remainder 0.67).
  const SplitDecision d = decide_split(request(12, {0.0, 2.0, 4.0}));
  CHECK(d.split == Split{4, 3, 5});
  CHECK(d.planned_speeds == std::vector<double>{3.0, 2.0, 4.0});
  // No speed known: the near-equal split.
  CHECK(split_of(request(7, {0.0, nan, 0.0})) == Split{3, 2, 2});
  // Speeds far apart, or tiny, still give a split (the slowest rank gets its floor).
  CHECK(split_of(request(8, {1e-320, 1.0})) == Split{0, 8});
  CHECK(split_of(request(8, {1e300, 1e-300, 2e300})) == Split{3, 0, 5});
  // A rank with no samples adds nothing to the step time.
  CHECK(predicted_step_s({0, 4}, {1.0, 2.0}, 0.5) == 2.5);
}

TEST_CASE("batch split: requests no split satisfies are refused", "[batch_split]") {
  using Catch::Matchers::Contains;
  SplitRequest q = request(8, {1.0, 1.0});
  q.floors = {5, 4};
  CHECK_THROWS_WITH(decide_split(q), Contains("need 9 samples, more than the global batch 8"));
  q = request(8, {1.0, 1.0});
  q.cap = 3;
  CHECK_THROWS_WITH(decide_split(q), Contains("cannot hold the global batch 8"));
  q.cap = 5;
  q.micro_batch = 3;
  q.global_batch = 9;
  q.current = {6, 3};
  CHECK_THROWS_WITH(decide_split(q), Contains("cannot hold the global batch 9"));
  q = request(8, {1.0, 1.0});
  q.cap = 4;
  q.floors = {0, 6};
  CHECK_THROWS_WITH(decide_split(q), Contains("rank 1's floor 6 is above the cap 4"));
  q.micro_batch = 2;  // rounding this floor up to whole micro-batches must not wrap to 0
  q.floors = {0, std::numeric_limits<std::size_t>::max()};
  CHECK_THROWS_WITH(decide_split(q), Contains("rank 1's floor 18446744073709551615 is above"));
  q = request(10, {1.0, 1.0});
  q.micro_batch = 4;
  CHECK_THROWS_WITH(decide_split(q), Contains("global batch 10 is not a multiple of"));
  q = request(8, {1.0, 1.0});
  q.speeds = {1.0};
  CHECK_THROWS_AS(decide_split(q), UsageError);
  SplitRequest none;
  none.global_batch = 8;
  none.cap = 8;
  CHECK_THROWS_WITH(decide_split(none), Contains("no ranks"));
  q = request(8, {1.0, 1.0});
  q.margin = 1.0;
  CHECK_THROWS_AS(decide_split(q), UsageError);
  q.margin = 0.0;
  q.comm_s = -1.0;
  CHECK_THROWS_AS(decide_split(q), UsageError);
}
