// Global sampler and rank slicing, tested exhaustively over small sizes: every
// sample once per epoch, order a function of (seed, epoch) only, slices that tile each batch,
// state/restore that continues the same sequence, and the --local-batches parser's errors.
#include "ringtrain/framework/data/sampler.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "ringtrain/framework/error.hpp"

using Catch::Matchers::Contains;
using namespace ringtrain::data;

namespace {

bool is_permutation_of_iota(std::vector<std::uint64_t> v) {
  std::sort(v.begin(), v.end());
  for (std::size_t i = 0; i < v.size(); ++i)
    if (v[i] != i) return false;
  return true;
}

template <class F>
std::string usage_error_message(F&& f) {
  try {
    f();
  } catch (const ringtrain::UsageError& e) {
    return e.what();
  }
  FAIL("expected a UsageError, but nothing was thrown");
  return {};
}

// Every vector of `length` entries in [0, max_value], in lexicographic order.
std::vector<std::vector<std::size_t>> all_vectors(std::size_t length, std::size_t max_value) {
  std::vector<std::vector<std::size_t>> out;
  std::vector<std::size_t> v(length, 0);
  while (true) {
    out.push_back(v);
    std::size_t i = 0;
    while (i < length && v[i] == max_value) v[i++] = 0;
    if (i == length) return out;
    v[i] += 1;
  }
}

}  // namespace

TEST_CASE("epoch_permutation is a permutation, a pure function of (seed, epoch)",
          "[data][sampler]") {
  for (std::size_t n = 0; n <= 64; ++n) {
    for (std::uint64_t epoch = 0; epoch < 3; ++epoch) {
      const auto order = epoch_permutation(42, epoch, n);
      REQUIRE(order.size() == n);
      REQUIRE(is_permutation_of_iota(order));
      REQUIRE(order == epoch_permutation(42, epoch, n));
      std::vector<std::uint64_t> filled(n, 999);
      epoch_permutation(42, epoch, filled);
      REQUIRE(filled == order);
    }
  }
  const std::size_t n = 1000;
  const auto base = epoch_permutation(7, 0, n);
  std::vector<std::uint64_t> identity(n);
  std::iota(identity.begin(), identity.end(), 0);
  CHECK(base != identity);
  CHECK(epoch_permutation(7, 1, n) != base);  // another epoch
  CHECK(epoch_permutation(8, 0, n) != base);  // another seed
}

TEST_CASE("epoch_permutation draws all orders of 3 equally often", "[data][sampler]") {
  // 6 orders, 6000 (seed, epoch) keys: about 1000 each (binomial sd ~ 29). A Fisher–Yates
  // with an off-by-one (Sattolo's cycle, or j in [0, n)) gives a visibly skewed histogram.
  std::map<std::vector<std::uint64_t>, int> histogram;
  for (std::uint64_t seed = 0; seed < 2000; ++seed)
    for (std::uint64_t epoch = 0; epoch < 3; ++epoch)
      histogram[epoch_permutation(seed, epoch, 3)]++;
  REQUIRE(histogram.size() == 6);
  for (const auto& [order, count] : histogram) {
    CHECK(count > 850);
    CHECK(count < 1150);
  }
}

TEST_CASE("GlobalSampler: each sample exactly once per epoch, short last batch",
          "[data][sampler]") {
  for (std::size_t n = 1; n <= 24; ++n) {
    for (std::size_t batch = 1; batch <= n; ++batch) {
      GlobalSampler sampler(3, n, batch);
      const std::size_t steps = (n + batch - 1) / batch;
      REQUIRE(sampler.steps_per_epoch() == steps);
      for (std::uint64_t epoch = 0; epoch < 3; ++epoch) {
        std::vector<std::uint64_t> seen;
        for (std::size_t s = 0; s < steps; ++s) {
          const SamplerState before = sampler.state();
          REQUIRE(before.epoch == epoch);
          REQUIRE(before.position == s * batch);
          const GlobalBatch b = sampler.next_batch();
          REQUIRE(b.epoch == epoch);
          REQUIRE(b.begin == s * batch);
          REQUIRE(b.samples.size() == (s + 1 < steps ? batch : n - (steps - 1) * batch));
          seen.insert(seen.end(), b.samples.begin(), b.samples.end());
        }
        REQUIRE(is_permutation_of_iota(seen));
        REQUIRE(seen == epoch_permutation(3, epoch, n));
        REQUIRE(sampler.state().epoch == epoch + 1);
        REQUIRE(sampler.state().position == 0);
      }
    }
  }
}

TEST_CASE("GlobalSampler: state()/restore() continues the same sequence", "[data][sampler]") {
  const std::size_t n = 23, batch = 5;  // 5 steps per epoch, the last one of 3
  for (std::size_t stop = 0; stop <= 12; ++stop) {
    GlobalSampler uninterrupted(11, n, batch);
    for (std::size_t s = 0; s < stop; ++s) uninterrupted.next_batch();
    const SamplerState saved = uninterrupted.state();

    GlobalSampler resumed(999, n, batch);  // another seed: restore must bring back the saved one
    resumed.next_batch();
    resumed.restore(saved);
    REQUIRE(resumed.state().seed == saved.seed);
    REQUIRE(resumed.state().epoch == saved.epoch);
    REQUIRE(resumed.state().position == saved.position);
    for (std::size_t s = 0; s < 12; ++s) {
      const GlobalBatch a = uninterrupted.next_batch();
      const GlobalBatch b = resumed.next_batch();
      REQUIRE(a.epoch == b.epoch);
      REQUIRE(a.begin == b.begin);
      REQUIRE(std::equal(a.samples.begin(), a.samples.end(), b.samples.begin(), b.samples.end()));
    }
  }
}

TEST_CASE("GlobalSampler: restore from a different global batch keeps the order",
          "[data][sampler]") {
  // Resuming with another global batch continues the same epoch order from the same position.
  GlobalSampler first(5, 20, 6);
  first.next_batch();  // positions [0, 6)
  GlobalSampler second(5, 20, 4);
  second.restore(first.state());
  const auto order = epoch_permutation(5, 0, 20);
  const GlobalBatch b = second.next_batch();
  REQUIRE(b.begin == 6);
  REQUIRE(std::equal(b.samples.begin(), b.samples.end(), order.begin() + 6, order.begin() + 10));
}

TEST_CASE("GlobalSampler: invalid configuration and state", "[data][sampler]") {
  CHECK_THROWS_AS(GlobalSampler(1, 0, 1), ringtrain::UsageError);
  CHECK_THROWS_AS(GlobalSampler(1, 10, 0), ringtrain::UsageError);
  CHECK_THROWS_AS(GlobalSampler(1, 10, 11), ringtrain::UsageError);
  GlobalSampler sampler(1, 10, 3);
  CHECK_THROWS_AS(sampler.restore({1, 0, 10}), ringtrain::DataError);
  CHECK_THROWS_AS(sampler.restore({1, 2, 70000}), ringtrain::DataError);
  // A failed restore leaves the sampler as it was.
  const GlobalBatch b = sampler.next_batch();
  CHECK(b.begin == 0);
  CHECK(b.epoch == 0);
  sampler.restore({1, 4, 9});
  const GlobalBatch last = sampler.next_batch();
  CHECK(last.samples.size() == 1);
  CHECK(last.samples[0] == epoch_permutation(1, 4, 10)[9]);
  CHECK(sampler.state().epoch == 5);
}

TEST_CASE("near_equal_split: sizes differ by at most one, larger first", "[data][sampler]") {
  for (std::size_t batch = 0; batch <= 40; ++batch) {
    for (std::size_t ranks = 1; ranks <= 9; ++ranks) {
      const auto sizes = near_equal_split(batch, ranks);
      REQUIRE(sizes.size() == ranks);
      REQUIRE(std::accumulate(sizes.begin(), sizes.end(), std::size_t{0}) == batch);
      REQUIRE(std::is_sorted(sizes.rbegin(), sizes.rend()));
      REQUIRE(sizes.front() - sizes.back() <= 1);
    }
  }
  CHECK_THROWS_AS(near_equal_split(4, 0), ringtrain::UsageError);
}

TEST_CASE("rank_slice tiles every batch, incl. empty slices and short batches", "[data][sampler]") {
  for (std::size_t ranks = 1; ranks <= 5; ++ranks) {
    for (const auto& local : all_vectors(ranks, 3)) {
      const std::size_t total = std::accumulate(local.begin(), local.end(), std::size_t{0});
      for (std::size_t actual = 0; actual <= total; ++actual) {
        std::size_t next = 0;  // where the next rank's slice must begin
        bool clipped = false;  // a rank before this one got less than its local batch
        for (std::size_t r = 0; r < ranks; ++r) {
          const Slice s = rank_slice(local, r, actual);
          REQUIRE(s.begin == next);
          REQUIRE(s.count <= local[r]);
          if (clipped) REQUIRE(s.count == 0);
          if (actual == total) REQUIRE(s.count == local[r]);
          clipped = clipped || s.count < local[r];
          next += s.count;
        }
        REQUIRE(next == actual);
      }
      CHECK_THROWS_AS(rank_slice(local, 0, total + 1), ringtrain::Error);
      CHECK_THROWS_AS(rank_slice(local, ranks, 0), ringtrain::Error);
    }
  }
}

TEST_CASE("sampler + rank slices: every sample processed once per epoch by some rank",
          "[data][sampler]") {
  for (std::size_t n = 1; n <= 17; ++n) {
    for (std::size_t batch = 1; batch <= n; ++batch) {
      for (std::size_t ranks = 1; ranks <= 4; ++ranks) {
        auto local = near_equal_split(batch, ranks);
        if (ranks > 1 && batch > 1) std::swap(local.front(), local.back());  // uneven, small first
        GlobalSampler sampler(17, n, batch);
        std::vector<int> times(n, 0);
        for (std::size_t s = 0; s < sampler.steps_per_epoch(); ++s) {
          const GlobalBatch b = sampler.next_batch();
          for (std::size_t r = 0; r < ranks; ++r) {
            const Slice slice = rank_slice(local, r, b.samples.size());
            for (std::uint64_t sample : b.samples.subspan(slice.begin, slice.count))
              times[sample]++;
          }
        }
        REQUIRE(std::all_of(times.begin(), times.end(), [](int t) { return t == 1; }));
      }
    }
  }
}

TEST_CASE("parse_local_batches accepts one count per rank summing to the global batch",
          "[data][sampler]") {
  CHECK(parse_local_batches("1,3", 2, 4) == std::vector<std::size_t>{1, 3});
  CHECK(parse_local_batches("0,128", 2, 128) == std::vector<std::size_t>{0, 128});
  CHECK(parse_local_batches(" 2, 2 ,4", 3, 8) == std::vector<std::size_t>{2, 2, 4});
  CHECK(parse_local_batches("7", 1, 7) == std::vector<std::size_t>{7});
}

TEST_CASE("parse_local_batches errors carry the values", "[data][sampler]") {
  CHECK_THAT(
      usage_error_message([] { parse_local_batches("1,3", 2, 128); }),
      Contains("--local-batches 1,3") && Contains("sum to 4") && Contains("--global-batch is 128"));
  CHECK_THAT(usage_error_message([] { parse_local_batches("1,2,1", 2, 4); }),
             Contains("lists 3 values") && Contains("2 ranks"));
  CHECK_THAT(usage_error_message([] { parse_local_batches("1,x", 2, 4); }),
             Contains("'x'") && Contains("not a number"));
  CHECK_THAT(usage_error_message([] { parse_local_batches("1.5,2.5", 2, 4); }),
             Contains("'1.5'") && Contains("not a number"));
  CHECK_THAT(usage_error_message([] { parse_local_batches("5,-1", 2, 4); }),
             Contains("-1") && Contains("negative"));
  CHECK_THAT(usage_error_message([] { parse_local_batches("1,,3", 3, 4); }), Contains("empty"));
  CHECK_THAT(usage_error_message([] { parse_local_batches("", 1, 4); }), Contains("empty"));
  CHECK_THAT(usage_error_message([] { parse_local_batches("99999999999999999999999,1", 2, 4); }),
             Contains("too large"));
  // Two huge counts whose true sum wraps around 2^64 to exactly the global batch.
  CHECK_THAT(usage_error_message([] { parse_local_batches("18446744073709551615,5", 2, 4); }),
             Contains("sum to"));
}
