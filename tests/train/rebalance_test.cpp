// What a re-split follows and what it records, without MPI: the smoothed compute speeds
// (train/step/speed_smoother.hpp) and the rebalance records of metrics.jsonl
// (train/run/rebalance_record.hpp).
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "ringtrain/framework/error.hpp"
#include "train/run/rebalance_record.hpp"
#include "train/step/batch_split.hpp"
#include "train/step/speed_smoother.hpp"

using namespace ringtrain;

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
  // Then s = 0.25·window + 0.75·s; a rank without samples keeps its speed.
  windows = {{200.0, 1.0, 0.0}, {0.0, 0.0, 0.0}, {40.0, 2.0, 0.0}};
  speeds.add_window(windows);
  CHECK(speeds.speeds() == std::vector<double>{125.0, 600.0, 20.0});
  CHECK_THROWS_AS(speeds.add_window(std::span(windows).first(2)), Error);
  CHECK_THROWS_AS(SpeedSmoother(2, 0.0), UsageError);
  CHECK_THROWS_AS(SpeedSmoother(2, 1.5), UsageError);
}

TEST_CASE("speeds: restored from a checkpoint, bad values unknown", "[rebalance]") {
  SpeedSmoother speeds(3);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> saved{250.0, nan, -4.0};
  speeds.restore(saved);
  CHECK(speeds.speeds() == std::vector<double>{250.0, 0.0, 0.0});
  const std::vector<ComputeWindow> windows{{50.0, 1.0, 0.0}, {10.0, 1.0, 0.0}, {0.0, 0.0, 0.0}};
  speeds.add_window(windows);
  CHECK(speeds.speeds() == std::vector<double>{150.0, 10.0, 0.0});
  CHECK_THROWS_AS(speeds.restore(std::span(saved).first(2)), Error);
}

TEST_CASE(
    "speeds: after a rank slows down, the split is within 10 % of its new steady state "
    "in 3 windows (default weight)",
    "[rebalance]") {
  // Two ranks at 100 samples/s; rank 1 then computes at 50: the steady split of 300 is 200,100.
  SpeedSmoother speeds(2);
  std::vector<ComputeWindow> windows{{150.0, 1.5, 0.0}, {150.0, 1.5, 0.0}};
  speeds.add_window(windows);
  SplitRequest q;
  q.global_batch = q.cap = 300;
  q.floors = {0, 0};
  q.current = {150, 150};
  q.margin = 0.0;
  windows[1].compute_s = 3.0;
  for (int window = 1; window <= 3; ++window) {
    speeds.add_window(windows);
    q.speeds = speeds.speeds();
    q.current = decide_split(q).split;
  }
  INFO("speeds " << q.speeds[0] << ", " << q.speeds[1]);
  CHECK(std::abs(double(q.current[0]) - 200.0) <= 20.0);
  CHECK(std::abs(double(q.current[1]) - 100.0) <= 10.0);
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
