// The save interval policy: Young/Daly τ = √(2·C·μ) against hand-computed values, the
// conversion to steps, and when a schedule saves and re-plans.
#include "ringtrain/checkpoint/interval.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "ringtrain/checkpoint/error.hpp"

using namespace ringtrain::checkpoint;

namespace {

// The steps in [from, to] after which `schedule` has a save due, saving (and telling it)
// each time with the cost `cost_s(step)` and step time `step_s`.
template <typename Cost>
std::vector<std::uint64_t> run(SaveSchedule& schedule, std::uint64_t from, std::uint64_t to,
                               Cost cost_s, double step_s) {
  std::vector<std::uint64_t> saves;
  for (std::uint64_t done = from; done <= to; ++done)
    if (schedule.due(done)) {
      saves.push_back(done);
      schedule.saved(done, cost_s(done), step_s);
    }
  return saves;
}

}  // namespace

TEST_CASE("Young/Daly: tau = sqrt(2 C mu), in steps, and its predicted overhead",
          "[checkpoint][interval]") {
  // C = 2 s, μ = 1 h: τ = √14400 = 120 s; at 0.5 s per step, 240 steps;
  // overhead 2/120 + 120/7200 = 1/30 = √(2·2/3600)
  const IntervalPlan plan = young_daly(2.0, 3600.0, 0.5);
  CHECK(plan.tau_s == 120.0);
  CHECK(plan.every_steps == 240);
  CHECK(plan.predicted_overhead == Approx(1.0 / 30.0).epsilon(1e-12));
  CHECK(plan.predicted_overhead == Approx(std::sqrt(2.0 * 2.0 / 3600.0)).epsilon(1e-12));
  CHECK(plan.cost_s == 2.0);
  CHECK(plan.mtbf_s == 3600.0);
  CHECK(plan.step_s == 0.5);

  // C = 0.5 s, μ = 100 s: τ = 10 s; 10 / 4 = 2.5 steps rounds to 3; 10 / 30 rounds up to 1
  CHECK(young_daly(0.5, 100.0, 4.0).every_steps == 3);
  CHECK(young_daly(0.5, 100.0, 30.0).every_steps == 1);
  CHECK(young_daly(0.5, 100.0, 4.1).every_steps == 2);
  // A free save: every step, no overhead predicted.
  CHECK(young_daly(0.0, 100.0, 0.1).every_steps == 1);
  CHECK(young_daly(0.0, 100.0, 0.1).predicted_overhead == 0.0);

  const double inf = std::numeric_limits<double>::infinity();
  for (const auto& [c, mu, s] : std::vector<std::tuple<double, double, double>>{
           {-1, 100, 1}, {1, 0, 1}, {1, -5, 1}, {1, 100, -1}, {NAN, 100, 1}, {1, inf, 1}})
    CHECK_THROWS_AS(young_daly(c, mu, s), CheckpointError);
}

TEST_CASE("a fixed schedule saves at multiples of K from step 0", "[checkpoint][interval]") {
  SaveSchedule ten = SaveSchedule::every(10);
  CHECK(run(
            ten, 1, 45, [](auto) { return 1.0; }, 0.1) ==
        std::vector<std::uint64_t>{10, 20, 30, 40});
  CHECK_FALSE(ten.plan().has_value());
  SaveSchedule resumed = SaveSchedule::every(10);  // resumed at step 17: the same save steps
  CHECK(run(
            resumed, 18, 45, [](auto) { return 1.0; }, 0.1) ==
        std::vector<std::uint64_t>{20, 30, 40});
  SaveSchedule none = SaveSchedule::every(0);
  CHECK(run(
            none, 1, 100, [](auto) { return 1.0; }, 0.1)
            .empty());
}

TEST_CASE(
    "Young/Daly schedule: measure on the first save, one interval after each save, "
    "re-plan when the cost drifts",
    "[checkpoint][interval]") {
  // μ = 100 s, step 0.5 s. C = 0.5 s: τ = 10 s = 20 steps. C = 2 s: τ = 20 s = 40 steps.
  SaveSchedule schedule = SaveSchedule::young_daly(100.0, 0, 5);
  CHECK_FALSE(schedule.plan().has_value());
  // The saves after steps 5, 25, 45 cost 0.5 s, 0.7 s, 0.7 s (within 1.5x: no re-plan); from
  // step 65 on 2 s (drift: re-plan at 65, then every 40 steps).
  const auto cost = [](std::uint64_t step) { return step <= 5 ? 0.5 : step <= 45 ? 0.7 : 2.0; };
  CHECK(run(schedule, 1, 200, cost, 0.5) ==
        std::vector<std::uint64_t>{5, 25, 45, 65, 105, 145, 185});
  REQUIRE(schedule.plan().has_value());
  CHECK(schedule.plan()->cost_s == 2.0);
  CHECK(schedule.plan()->every_steps == 40);

  // The plan is returned exactly when it changes: a cost below C / 1.5 re-plans as well.
  SaveSchedule again = SaveSchedule::young_daly(100.0, 0, 5);
  CHECK(again.saved(5, 0.5, 0.5).has_value());
  CHECK_FALSE(again.saved(25, 0.5 * 1.5, 0.5).has_value());
  CHECK_FALSE(again.saved(45, 0.5 / 1.5, 0.5).has_value());
  const auto lower = again.saved(65, 0.3, 0.5);
  REQUIRE(lower.has_value());
  CHECK(lower->tau_s == Approx(std::sqrt(60.0)));
  CHECK(lower->every_steps == 15);  // √60 / 0.5 = 15.49
  CHECK(again.due(80));
  CHECK_FALSE(again.due(79));

  // A resume at step 100 measures again 5 steps later.
  SaveSchedule resumed = SaveSchedule::young_daly(100.0, 100, 5);
  CHECK_FALSE(resumed.due(100));
  CHECK(resumed.due(105));
  CHECK_THROWS_AS(SaveSchedule::young_daly(0.0, 0, 5), CheckpointError);
  CHECK_THROWS_AS(SaveSchedule::young_daly(100.0, 0, 0), CheckpointError);
}

TEST_CASE("Young/Daly schedule: a failed save is retried one interval later",
          "[checkpoint][interval]") {
  // Before any plan, the retry waits the first save's delay again.
  SaveSchedule schedule = SaveSchedule::young_daly(100.0, 0, 5);
  REQUIRE(schedule.due(5));
  schedule.failed(5);
  CHECK_FALSE(schedule.plan().has_value());
  CHECK_FALSE(schedule.due(5));
  CHECK_FALSE(schedule.due(9));
  CHECK(schedule.due(10));
  // With a plan (C = 0.5 s, μ = 100 s, s = 0.5 s: 20 steps), one interval.
  schedule.saved(10, 0.5, 0.5);
  REQUIRE(schedule.due(30));
  schedule.failed(30);
  CHECK(schedule.plan()->every_steps == 20);
  CHECK_FALSE(schedule.due(30));
  CHECK(schedule.due(50));
  // A fixed schedule keeps its multiples of K.
  SaveSchedule fixed = SaveSchedule::every(10);
  fixed.failed(10);
  CHECK(fixed.due(20));
}

TEST_CASE("Young/Daly with a persist latency: waste C/tau + (tau/2 + L)/mu, tau kept >= L",
          "[checkpoint][interval]") {
  // C = 1 ms, μ = 32 ms: √(2Cμ) = 8 ms. L = 2 ms leaves τ alone and adds L/μ to the waste.
  const IntervalPlan short_l = young_daly(0.001, 0.032, 0.001, 0.002);
  CHECK(short_l.tau_s == Approx(0.008));
  CHECK(short_l.every_steps == 8);
  CHECK(short_l.predicted_overhead == Approx(0.001 / 0.008 + (0.004 + 0.002) / 0.032));
  // L = 20 ms > 8 ms: τ = L, 20 steps.
  const IntervalPlan long_l = young_daly(0.001, 0.032, 0.001, 0.020);
  CHECK(long_l.tau_s == 0.020);
  CHECK(long_l.every_steps == 20);
  CHECK(long_l.predicted_overhead == Approx(0.001 / 0.020 + (0.010 + 0.020) / 0.032));
  CHECK_THROWS_AS(young_daly(0.001, 0.032, 0.001, -1.0), CheckpointError);
  // The schedule re-plans once a measured latency exceeds the plan's τ.
  SaveSchedule schedule = SaveSchedule::young_daly(0.032, 0, 5);
  REQUIRE(schedule.saved(5, 0.001, 0.001, 0.0).has_value());
  CHECK(schedule.due(13));
  CHECK_FALSE(schedule.saved(13, 0.001, 0.001, 0.007).has_value());
  const auto replanned = schedule.saved(21, 0.001, 0.001, 0.020);
  REQUIRE(replanned.has_value());
  CHECK(replanned->every_steps == 20);
  CHECK(schedule.due(41));
}
