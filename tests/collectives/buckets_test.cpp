// The bucket plan, exhaustively and without MPI: every gradient covered exactly once, in
// backward order, each bucket within the cap unless it holds one oversized parameter alone,
// and greedy (a bucket closes only when the next parameter would not fit). And the default
// cap from the α-β model.
#include "ringtrain/collectives/buckets.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <stdexcept>
#include <vector>

using namespace ringtrain::collectives;

namespace {

// Checks every property of one plan; returns a description of the first failure ("" if ok).
std::string check_plan(const std::vector<std::size_t>& sizes, std::size_t cap_bytes) {
  const std::vector<Bucket> plan = plan_buckets(sizes, cap_bytes);
  const std::size_t cap = cap_bytes / sizeof(float);
  std::vector<std::size_t> offset(sizes.size() + 1, 0);
  for (std::size_t i = 0; i < sizes.size(); ++i) offset[i + 1] = offset[i] + sizes[i];
  if (sizes.empty()) return plan.empty() ? "" : "buckets for no parameters";
  if (plan.empty()) return "no buckets";
  // Backward order: bucket 0 ends at the end of the buffer and each next one ends where the
  // one before begins; the last one starts at 0. Parameters likewise, last first.
  std::size_t expected_end = offset.back();
  std::size_t expected_last_parameter = sizes.size();  // one past
  for (std::size_t b = 0; b < plan.size(); ++b) {
    const Bucket& k = plan[b];
    if (k.parameters == 0) return "empty bucket";
    if (k.first_parameter + k.parameters != expected_last_parameter) return "parameter order";
    if (k.offset + k.elements != expected_end) return "not contiguous in backward order";
    if (k.offset != offset[k.first_parameter]) return "offset is not its first parameter's";
    std::size_t sum = 0;
    for (std::size_t p = k.first_parameter; p < k.first_parameter + k.parameters; ++p)
      sum += sizes[p];
    if (sum != k.elements) return "elements are not the sum of its parameters";
    if (k.elements > cap && k.parameters != 1) return "over the cap with several parameters";
    // Greedy: the parameter that comes next in backward order did not fit.
    if (b + 1 < plan.size() && k.elements + sizes[k.first_parameter - 1] <= cap)
      return "closed although the next parameter fits";
    expected_end = k.offset;
    expected_last_parameter = k.first_parameter;
  }
  if (expected_end != 0 || expected_last_parameter != 0) return "does not reach the start";
  return "";
}

}  // namespace

TEST_CASE("bucket plan: the worked example of buckets.hpp") {
  const std::vector<std::size_t> sizes = {30, 50, 250, 40, 70};
  const std::vector<Bucket> plan = plan_buckets(sizes, 400);
  REQUIRE(plan.size() == 4);
  CHECK((plan[0].offset == 370 && plan[0].elements == 70 && plan[0].first_parameter == 4));
  CHECK((plan[1].offset == 330 && plan[1].elements == 40 && plan[1].first_parameter == 3));
  CHECK((plan[2].offset == 80 && plan[2].elements == 250 && plan[2].parameters == 1));
  CHECK((plan[3].offset == 0 && plan[3].elements == 80 && plan[3].parameters == 2));
}

TEST_CASE("bucket plan: every list of up to 5 parameters of 0..6 floats, every cap 1..20 floats") {
  std::size_t plans = 0;
  for (std::size_t count = 0; count <= 5; ++count) {
    std::vector<std::size_t> sizes(count, 0);
    std::size_t combinations = 1;
    for (std::size_t i = 0; i < count; ++i) combinations *= 7;
    for (std::size_t code = 0; code < combinations; ++code) {
      std::size_t c = code;
      for (std::size_t i = 0; i < count; ++i, c /= 7) sizes[i] = c % 7;
      for (std::size_t cap_floats = 1; cap_floats <= 20; ++cap_floats) {
        // Caps that are not a multiple of 4 bytes round down to whole floats.
        for (std::size_t extra : {0, 3}) {
          const std::string failure = check_plan(sizes, cap_floats * 4 + extra);
          INFO("sizes " << count << " code " << code << ", cap " << cap_floats << " floats");
          REQUIRE(failure == "");
          ++plans;
        }
      }
    }
  }
  CHECK(plans == 2 * 20 * (1 + 7 + 49 + 343 + 2401 + 16807));
}

TEST_CASE("bucket plan: the mlp's parameters at the benchmark's caps") {
  // 784-1024-1024-10: weight, bias per layer, in buffer (forward) order.
  const std::vector<std::size_t> mlp = {784 * 1024, 1024, 1024 * 1024, 1024, 1024 * 10, 10};
  for (std::size_t cap = 16 * 1024; cap <= 64u * 1024 * 1024; cap *= 2) {
    INFO("cap " << cap);
    REQUIRE(check_plan(mlp, cap) == "");
  }
  // 1 MiB: the last layer and the middle bias; the middle weight alone (oversized); the
  // first bias; the first weight alone (oversized).
  const std::vector<Bucket> plan = plan_buckets(mlp, 1024 * 1024);
  REQUIRE(plan.size() == 4);
  CHECK(plan[0].parameters == 3);
  CHECK((plan[1].parameters == 1 && plan[1].elements == 1024 * 1024));
  CHECK((plan[2].parameters == 1 && plan[2].elements == 1024));
  CHECK((plan[3].parameters == 1 && plan[3].elements == 784 * 1024));
  // The whole model in one bucket.
  const std::vector<Bucket> one = plan_buckets(mlp, 64u * 1024 * 1024);
  REQUIRE(one.size() == 1);
  CHECK((one[0].offset == 0 && one[0].parameters == 6));
}

TEST_CASE("bucket plan: a cap below one float is refused") {
  const std::vector<std::size_t> sizes = {3};
  CHECK_THROWS_AS(plan_buckets(sizes, 3), std::invalid_argument);
}

TEST_CASE("default bucket cap: smallest power of two with the fixed cost <= 10 %") {
  // α = 5 µs, B = 8 GB/s, N = 2: M >= 9 · 5e-6 · 2 · 8e9 = 720,000 B -> 1 MiB.
  const AlphaBeta model{5e-6, 8e9};
  const BucketChoice two = default_bucket_cap(model, 2, 1u << 30);
  CHECK(two.cap_bytes == 1024 * 1024);
  CHECK(two.reason.find("alpha = 5 us") != std::string::npos);
  // The rule holds at the chosen size and fails at half of it.
  auto fixed_share = [&](double bytes, int N) {
    return 2.0 * (N - 1) * model.alpha_s / predict_seconds(model, N, bytes);
  };
  CHECK(fixed_share(double(two.cap_bytes), 2) <= 0.1);
  CHECK(fixed_share(double(two.cap_bytes) / 2, 2) > 0.1);
  // N = 4: 9 · 5e-6 · 4 · 8e9 = 1.44 MB -> 2 MiB.
  CHECK(default_bucket_cap(model, 4, 1u << 30).cap_bytes == 2 * 1024 * 1024);
  // A tiny α still gives at least 4 KiB; one rank gets the whole buffer.
  CHECK(default_bucket_cap(AlphaBeta{1e-9, 1e9}, 2, 1u << 30).cap_bytes == 4096);
  CHECK(default_bucket_cap(model, 1, 12345 * 4).cap_bytes == 12345 * 4);
}
