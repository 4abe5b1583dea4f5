// What a re-split follows and what it records, without MPI: the smoothed compute speeds
// (train/step/speed_smoother.hpp), the window's exchange between ranks with the allreduce
// simulated (train/step/rebalance_window.hpp), and the rebalance records of metrics.jsonl
// (train/run/rebalance_record.hpp).
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "ringtrain/framework/error.hpp"
#include "train/run/rebalance_record.hpp"
#include "train/step/batch_split.hpp"
#include "train/step/rebalance_window.hpp"
#include "train/step/speed_smoother.hpp"

using namespace ringtrain;

namespace {

// Rank r's measure of step k: values that differ by rank and by step.
StepMeasure measure(std::size_t r, std::size_t k) {
  return {8 * (r + 1) + k, 0.1 * double(r + 1) + 0.003 * double(k), 0.001 * double(r * k),
          0.02 / double(r + 1) + 0.0007 * double(k)};
}

// The allreduce of the packed vectors, adding the ranks in `order`.
std::vector<double> summed(const std::vector<std::vector<double>>& packed,
                           const std::vector<std::size_t>& order) {
  std::vector<double> sum(packed[0].size(), 0.0);
  for (const std::size_t r : order)
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += packed[r][i];
  return sum;
}

}  // namespace

TEST_CASE("speeds: a window's speed is its samples over its compute time net of core waits",
          "[rebalance]") {
  CHECK(SpeedSmoother::window_speed({100.0, 2.0, 0.0}) == 50.0);
  CHECK(SpeedSmoother::window_speed({100.0, 2.0, 1.0}) == 100.0);
  // Windows that say nothing about the speed.
  CHECK(SpeedSmoother::window_speed({0.0, 2.0, 0.0}) == 0.0);
  CHECK(SpeedSmoother::window_speed({100.0, 0.0, 0.0}) == 0.0);
  CHECK(SpeedSmoother::window_speed({100.0, 2.0, 2.0}) == 0.0);
  CHECK(SpeedSmoother::window_speed({100.0, 1e-320, 0.0}) == 0.0);
}

TEST_CASE("speeds: exponential smoothing across windows", "[rebalance]") {
  SpeedSmoother speeds(3, 0.25);
  CHECK(speeds.speeds() == std::vector<double>{0.0, 0.0, 0.0});
  // The first known window is taken as it is; rank 2 computed nothing and stays unknown.
  std::vector<ComputeWindow> windows{{100.0, 1.0, 0.0}, {300.0, 1.0, 0.5}, {0.0, 0.0, 0.0}};
  speeds.add_window(windows);
  CHECK(speeds.speeds() == std::vector<double>{100.0, 600.0, 0.0});
  // Then, within the change factor, s = 0.25·window + 0.75·s; a rank without samples keeps
  // its speed.
  windows = {{110.0, 1.0, 0.0}, {0.0, 0.0, 0.0}, {40.0, 2.0, 0.0}};
  speeds.add_window(windows);
  CHECK(speeds.speeds() == std::vector<double>{102.5, 600.0, 20.0});
  CHECK_THROWS_AS(speeds.add_window(std::span(windows).first(2)), Error);
  CHECK_THROWS_AS(SpeedSmoother(2, 0.0), UsageError);
  CHECK_THROWS_AS(SpeedSmoother(2, 1.5), UsageError);
}

TEST_CASE("speeds: noise under the change factor is smoothed, never taken as is", "[rebalance]") {
  // Windows alternating 10 % above and below 100 samples/s: each is folded in with the weight.
  SpeedSmoother speeds(1);
  std::vector<ComputeWindow> window{{100.0, 1.0, 0.0}};
  speeds.add_window(window);
  double expected = 100.0;
  for (int w = 0; w < 8; ++w) {
    const double now = w % 2 == 0 ? 110.0 : 90.0;
    window[0].samples = now;
    speeds.add_window(window);
    expected = kSpeedWeight * now + (1.0 - kSpeedWeight) * expected;
    CHECK(speeds.speeds()[0] == expected);
    CHECK(speeds.speeds()[0] != now);
  }
}

TEST_CASE("speeds: a step change of speed is followed in one window", "[rebalance]") {
  SpeedSmoother speeds(3);
  std::vector<ComputeWindow> windows{{100.0, 1.0, 0.0}, {100.0, 1.0, 0.0}, {100.0, 1.0, 0.0}};
  speeds.add_window(windows);
  // Rank 0 halves its speed, rank 1 doubles it, rank 2 computes nothing: the first two are
  // taken as they are, the third keeps its speed.
  windows = {{50.0, 1.0, 0.0}, {200.0, 1.0, 0.0}, {0.0, 0.0, 0.0}};
  speeds.add_window(windows);
  CHECK(speeds.speeds() == std::vector<double>{50.0, 200.0, 100.0});
  // At the factor itself it is still smoothed; just beyond it, taken as is (both ways).
  const double at = 50.0 * kSpeedChange, beyond = 50.0 * kSpeedChange * 1.01;
  windows = {{at, 1.0, 0.0}, {200.0 / (kSpeedChange * 1.01), 1.0, 0.0}, {0.0, 0.0, 0.0}};
  speeds.add_window(windows);
  CHECK(speeds.speeds()[0] == kSpeedWeight * at + (1.0 - kSpeedWeight) * 50.0);
  CHECK(speeds.speeds()[1] == windows[1].samples);
  CHECK(speeds.speeds()[2] == 100.0);
  SpeedSmoother fresh(1);
  const std::vector<ComputeWindow> first{{50.0, 1.0, 0.0}}, second{{beyond, 1.0, 0.0}};
  fresh.add_window(first);
  fresh.add_window(second);
  CHECK(fresh.speeds()[0] == beyond);
}

TEST_CASE("speeds: restored from a checkpoint, bad values unknown", "[rebalance]") {
  SpeedSmoother speeds(3);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> saved{250.0, nan, -4.0};
  speeds.restore(saved);
  CHECK(speeds.speeds() == std::vector<double>{250.0, 0.0, 0.0});
  const std::vector<ComputeWindow> windows{{200.0, 1.0, 0.0}, {10.0, 1.0, 0.0}, {0.0, 0.0, 0.0}};
  speeds.add_window(windows);
  CHECK(speeds.speeds() == std::vector<double>{225.0, 10.0, 0.0});
  CHECK_THROWS_AS(speeds.restore(std::span(saved).first(2)), Error);
}

TEST_CASE("speeds: a smoother restored from saved speeds goes on as the one that saved them",
          "[rebalance]") {
  // The smoothed speeds are the whole state: the same windows after a restore give the same
  // speeds, smoothed or taken as is.
  const std::vector<std::vector<ComputeWindow>> windows{
      {{100.0, 1.0, 0.0}, {80.0, 1.0, 0.0}},
      {{105.0, 1.0, 0.0}, {82.0, 1.0, 0.0}},
      {{40.0, 1.0, 0.0}, {90.0, 1.0, 0.0}},
      {{44.0, 1.0, 0.0}, {0.0, 0.0, 0.0}},
  };
  SpeedSmoother uninterrupted(2);
  for (std::size_t w = 0; w < 2; ++w) uninterrupted.add_window(windows[w]);
  SpeedSmoother resumed(2);
  resumed.restore(uninterrupted.speeds());
  for (std::size_t w = 2; w < windows.size(); ++w) {
    uninterrupted.add_window(windows[w]);
    resumed.add_window(windows[w]);
    CHECK(resumed.speeds() == uninterrupted.speeds());
  }
}

TEST_CASE(
    "speeds: after a rank slows down, or the slowness moves, the split reaches its new steady "
    "state at the next re-split (default weight)",
    "[rebalance]") {
  // Two ranks at 100 samples/s; rank 1 then computes at 50: the steady split of 300 is 200,100;
  // then rank 0 computes at 50 and rank 1 at 100 again: 100,200.
  SpeedSmoother speeds(2);
  std::vector<ComputeWindow> windows{{150.0, 1.5, 0.0}, {150.0, 1.5, 0.0}};
  speeds.add_window(windows);
  SplitRequest q;
  q.global_batch = q.cap = 300;
  q.floors = {0, 0};
  q.current = {150, 150};
  q.margin = 0.0;
  const auto one_window = [&] {
    speeds.add_window(windows);
    q.speeds = speeds.speeds();
    q.current = decide_split(q).split;
    INFO("speeds " << q.speeds[0] << ", " << q.speeds[1]);
  };
  windows[1].compute_s = 3.0;
  one_window();
  CHECK(q.current == std::vector<std::size_t>{200, 100});
  windows = {{200.0, 4.0, 0.0}, {100.0, 1.0, 0.0}};  // measured at 200,100
  one_window();
  CHECK(q.current == std::vector<std::size_t>{100, 200});
}

TEST_CASE("rebalance records: the decision and the measurement after it", "[rebalance]") {
  SplitRequest q;
  q.global_batch = q.cap = 64;
  q.floors = {0, 0};
  q.current = {32, 32};
  q.speeds = {5000.0, 0.0};
  q.comm_s = 0.001;
  SplitDecision d;
  d.split = {40, 24};
  d.changed = true;
  d.current_step_s = 0.0074;
  d.proposed_step_s = 0.0063;
  d.planned_speeds = {5000.0, 3000.0};
  const nlohmann::json record = nlohmann::json::parse(rebalance_record(40, q, d).dump());
  CHECK(record["step"] == 40);
  const nlohmann::json& r = record["rebalance"];
  CHECK(r["old_split"] == nlohmann::json({32, 32}));
  CHECK(r["new_split"] == nlohmann::json({40, 24}));
  CHECK(r["measured_speeds"] == nlohmann::json({5000.0, 0.0}));
  CHECK(r["planned_speeds"] == nlohmann::json({5000.0, 3000.0}));
  CHECK(r["comm_s"] == 0.001);
  CHECK(r["margin"] == kSplitMargin);
  CHECK(r["predicted_step_s"]["old"] == 0.0074);
  CHECK(r["predicted_step_s"]["new"] == 0.0063);
  CHECK(record.size() == 2);
  CHECK(r.size() == 7);

  const nlohmann::json measured =
      nlohmann::json::parse(rebalance_measured_record(60, 40, {40, 24}, 0.008, 0.01).dump());
  CHECK(measured["step"] == 60);
  const nlohmann::json& m = measured["rebalance_measured"];
  CHECK(m["since_step"] == 40);
  CHECK(m["split"] == nlohmann::json({40, 24}));
  CHECK(m["predicted_step_s"] == 0.008);
  CHECK(m["measured_step_s"] == 0.01);
  CHECK(m["measured_over_predicted"].get<double>() == Approx(1.25));
}

TEST_CASE("rebalance window: N = 1..4 ranks unpack the same windows in any order of the sum",
          "[rebalance]") {
  constexpr std::size_t kSteps = 3;
  for (std::size_t n = 1; n <= 4; ++n) {
    INFO("N = " << n);
    std::vector<RebalanceWindow> ranks;
    std::vector<StepMeasure> expected(n);
    for (std::size_t r = 0; r < n; ++r) {
      ranks.emplace_back(n, r);
      for (std::size_t k = 0; k < kSteps; ++k) {
        const StepMeasure m = measure(r, k);
        ranks[r].add_step(m);
        expected[r].samples += m.samples;
        expected[r].compute_s += m.compute_s;
        expected[r].core_wait_s += m.core_wait_s;
        expected[r].sum_s += m.sum_s;
      }
    }
    const std::vector<std::size_t> split(n, 5);
    std::vector<std::vector<double>> packed;
    std::vector<std::span<double>> in_place;
    for (RebalanceWindow& rank : ranks) {
      in_place.push_back(rank.pack(split));
      packed.emplace_back(in_place.back().begin(), in_place.back().end());
    }
    std::vector<std::size_t> forward(n), backward(n);
    for (std::size_t r = 0; r < n; ++r) forward[r] = r, backward[r] = n - 1 - r;
    const std::vector<double> sum = summed(packed, forward);
    REQUIRE(sum == summed(packed, backward));
    for (std::size_t r = 0; r < n; ++r) {  // the allreduce writes the sum in place
      std::copy(sum.begin(), sum.end(), in_place[r].begin());
      const WindowTotals totals = ranks[r].unpack(in_place[r]);
      REQUIRE(totals.windows.size() == n);
      for (std::size_t r = 0; r < n; ++r) {
        CHECK(totals.windows[r].samples == double(expected[r].samples));
        CHECK(totals.windows[r].compute_s == expected[r].compute_s);
        CHECK(totals.windows[r].core_wait_s == expected[r].core_wait_s);
      }
      // The last rank's sum phase is the shortest (measure()): comm is its mean per step.
      CHECK(totals.comm_s == expected[n - 1].sum_s / double(kSteps));
      CHECK(totals.same_split);
    }
    // The next window's vector holds this rank's slot alone again, not the last sum.
    for (std::size_t r = 0; r < n; ++r) {
      ranks[r].reset();
      const std::span<double> next = ranks[r].pack(split);
      for (std::size_t i = 0; i < next.size(); ++i)
        if (i / RebalanceWindow::kSlots != r) CHECK(next[i] == 0.0);
    }
  }
}

TEST_CASE("rebalance window: a rank that applied another split is seen by every rank",
          "[rebalance]") {
  std::vector<RebalanceWindow> ranks{{3, 0}, {3, 1}, {3, 2}};
  std::vector<std::vector<double>> packed;
  const std::vector<std::vector<std::size_t>> applied{{4, 4, 8}, {4, 4, 8}, {4, 8, 4}};
  for (std::size_t r = 0; r < 3; ++r) {
    ranks[r].add_step(measure(r, 0));
    const std::span<double> out = ranks[r].pack(applied[r]);
    packed.emplace_back(out.begin(), out.end());
  }
  const std::vector<double> sum = summed(packed, {0, 1, 2});
  for (const RebalanceWindow& rank : ranks) CHECK_FALSE(rank.unpack(sum).same_split);
  // Hashes tell the order of the values apart and stay below 2^48.
  const std::vector<std::size_t> a{1, 3}, b{3, 1};
  CHECK(RebalanceWindow::split_hash(a) != RebalanceWindow::split_hash(b));
  CHECK(RebalanceWindow::split_hash(a) < (std::uint64_t{1} << 48));
}

TEST_CASE("rebalance window: reset starts an empty window; bad sizes are refused", "[rebalance]") {
  RebalanceWindow window(2, 1);
  window.add_step(measure(1, 0));
  window.reset();
  CHECK(window.steps() == 0);
  const std::vector<std::size_t> split{2, 2};
  const std::span<double> out = window.pack(split);
  const std::vector<double> packed(out.begin(), out.end());
  const WindowTotals totals = window.unpack(packed);
  CHECK(totals.windows[1].samples == 0.0);
  CHECK(totals.windows[1].compute_s == 0.0);
  CHECK(totals.comm_s == 0.0);
  CHECK(packed[RebalanceWindow::kSlots + 4] == double(RebalanceWindow::split_hash(split)));
  CHECK_THROWS_AS(window.unpack(std::span(packed).first(3)), Error);
  CHECK_THROWS_AS(RebalanceWindow(2, 2), Error);
}
