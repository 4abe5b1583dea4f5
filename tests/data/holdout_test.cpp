// The validation hold-out (holdout.hpp): the draw is a pure function of (n, F, seed) whose two
// parts are disjoint, cover every sample, keep the stored order and hold round(F·n); the views
// gather exactly their stored samples and labels, sharing the samples (floats in memory too).
#include "ringtrain/framework/data/holdout.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>

#include "ringtrain/framework/error.hpp"

using ringtrain::data::Dataset;
using ringtrain::data::hold_out;

TEST_CASE("hold_out: disjoint, complete, ordered, round(F n) held out, the seed's alone",
          "[data][holdout]") {
  for (std::uint64_t n : {2, 3, 10, 97, 1000})
    for (double fraction : {0.01, 0.1, 0.25, 0.5, 0.9})
      for (std::uint64_t seed : {0, 1, 7}) {
        const double held = std::round(fraction * double(n));
        if (held < 1 || held > double(n) - 1) {
          CHECK_THROWS_AS(hold_out(n, fraction, seed), ringtrain::UsageError);
          continue;
        }
        INFO("n " << n << " F " << fraction << " seed " << seed);
        const auto parts = hold_out(n, fraction, seed);
        CHECK(parts.validation.size() == std::size_t(held));
        std::vector<std::uint64_t> all = parts.train;
        all.insert(all.end(), parts.validation.begin(), parts.validation.end());
        std::sort(all.begin(), all.end());
        std::vector<std::uint64_t> expected(n);
        std::iota(expected.begin(), expected.end(), 0);
        CHECK(all == expected);
        CHECK(std::is_sorted(parts.train.begin(), parts.train.end()));
        CHECK(std::is_sorted(parts.validation.begin(), parts.validation.end()));
        const auto again = hold_out(n, fraction, seed);
        CHECK(again.validation == parts.validation);
      }
  // Another seed holds out other samples.
  CHECK(hold_out(1000, 0.1, 1).validation != hold_out(1000, 0.1, 2).validation);
  CHECK_THROWS_WITH(hold_out(10, 0.0, 0), Catch::Contains("--validation-fraction 0"));
}

TEST_CASE("split_views: each view gathers its stored samples and labels, sharing the floats",
          "[data][holdout]") {
  Dataset stored;
  stored.sample_shape = {2};
  stored.num_classes = 5;
  stored.images = ringtrain::Tensor({10, 2});
  for (std::size_t i = 0; i < 20; ++i) stored.images.data()[i] = float(i) + 0.5f;
  for (std::int32_t i = 0; i < 10; ++i) stored.labels.push_back(i % 5);
  const auto parts = hold_out(10, 0.3, 4);
  const auto views = ringtrain::data::split_views(std::move(stored), parts);
  CHECK(views.train.mapped.floats == views.validation.mapped.floats);  // one copy of the floats
  for (const auto& [view, rows] :
       {std::pair{&views.train, parts.train}, std::pair{&views.validation, parts.validation}}) {
    REQUIRE(view->size() == rows.size());
    std::vector<std::uint64_t> indices(rows.size());
    std::iota(indices.begin(), indices.end(), 0);
    std::vector<float> x(rows.size() * 2);
    std::vector<std::int32_t> y(rows.size());
    ringtrain::data::gather_batch(*view, indices, x, y);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      CHECK(x[2 * i] == float(2 * rows[i]) + 0.5f);
      CHECK(x[2 * i + 1] == float(2 * rows[i] + 1) + 0.5f);
      CHECK(y[i] == std::int32_t(rows[i] % 5));
    }
  }
}
