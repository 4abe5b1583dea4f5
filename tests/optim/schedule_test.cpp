// Learning-rate schedules at the steps where something happens (warmup start and end,
// decay boundaries, cosine midpoint and end), validation, and batch-size scaling.
#include <catch2/catch.hpp>

#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/optim/schedule.hpp"

namespace ringtrain {
namespace {

ScheduleConfig schedule(std::string kind, float base_lr) {
  ScheduleConfig c;
  c.kind = std::move(kind);
  c.base_lr = base_lr;
  return c;
}

TEST_CASE("constant schedule with and without warmup", "[optim][schedule]") {
  auto c = schedule("constant", 0.4f);
  CHECK(learning_rate(c, 0) == 0.4f);
  CHECK(learning_rate(c, 1000000) == 0.4f);

  c.warmup_steps = 4;  // 0.1, 0.2, 0.3, 0.4, then 0.4
  CHECK(learning_rate(c, 0) == Approx(0.1));
  CHECK(learning_rate(c, 1) == Approx(0.2));
  CHECK(learning_rate(c, 3) == Approx(0.4));  // warmup reaches base_lr on its last step
  CHECK(learning_rate(c, 4) == Approx(0.4));
  CHECK(learning_rate(c, 99) == Approx(0.4));
}

TEST_CASE("step schedule decays by gamma every step_size steps after warmup", "[optim][schedule]") {
  auto c = schedule("step", 0.4f);
  c.warmup_steps = 4;
  c.step_size = 10;
  c.gamma = 0.1f;
  CHECK(learning_rate(c, 0) == Approx(0.1));
  CHECK(learning_rate(c, 3) == Approx(0.4));
  CHECK(learning_rate(c, 4) == Approx(0.4));    // first step after warmup: s = 0
  CHECK(learning_rate(c, 13) == Approx(0.4));   // s = 9, last one before the boundary
  CHECK(learning_rate(c, 14) == Approx(0.04));  // s = 10: first decay
  CHECK(learning_rate(c, 23) == Approx(0.04));
  CHECK(learning_rate(c, 24) == Approx(0.004));  // s = 20: second decay

  c.warmup_steps = 0;
  c.gamma = 0.5f;
  CHECK(learning_rate(c, 9) == Approx(0.4));
  CHECK(learning_rate(c, 10) == Approx(0.2));
  CHECK(learning_rate(c, 35) == Approx(0.05));  // ⌊35/10⌋ = 3: 0.4·0.5³
}

TEST_CASE("cosine schedule from base_lr to min_lr after warmup", "[optim][schedule]") {
  auto c = schedule("cosine", 1.0f);
  c.warmup_steps = 10;
  c.total_steps = 110;  // 100 cosine steps: s = step − 10
  c.min_lr = 0.1f;
  CHECK(learning_rate(c, 0) == Approx(0.1));
  CHECK(learning_rate(c, 9) == Approx(1.0));
  CHECK(learning_rate(c, 10) == Approx(1.0));  // s = 0: cos 0 = 1
  // s = 50, midpoint: cos(π/2) = 0, lr = 0.1 + 0.9·½ = 0.55
  CHECK(learning_rate(c, 60) == Approx(0.55));
  // s = 25: cos(π/4) = √2/2, lr = 0.1 + 0.9·½·(1 + 0.70711) = 0.86820
  CHECK(learning_rate(c, 35) == Approx(0.868198).epsilon(1e-5));
  CHECK(learning_rate(c, 110) == Approx(0.1));  // s = 100: cos π = −1, the end
  CHECK(learning_rate(c, 500) == Approx(0.1));  // held at min_lr after the end

  c.warmup_steps = 0;
  c.total_steps = 4;
  c.min_lr = 0.0f;
  // s/4 = 0, ¼, ½, ¾, 1 → ½(1 + cos): 1, 0.85355, 0.5, 0.14645, 0
  CHECK(learning_rate(c, 0) == Approx(1.0));
  CHECK(learning_rate(c, 1) == Approx(0.853553));
  CHECK(learning_rate(c, 2) == Approx(0.5));
  CHECK(learning_rate(c, 3) == Approx(0.146447));
  CHECK(learning_rate(c, 4) == Approx(0.0).margin(1e-7));
}

TEST_CASE("schedule validation names the field and its value", "[optim][schedule]") {
  auto throws_with = [](const ScheduleConfig& c, const std::string& text) {
    CHECK_THROWS_AS(validate(c), UsageError);
    CHECK_THROWS_WITH(validate(c), Catch::Contains(text));
  };
  throws_with(schedule("linear", 0.1f), "unknown schedule 'linear'");
  throws_with(schedule("constant", 0.0f), "learning rate 0");
  throws_with(schedule("constant", -0.1f), "learning rate -0.1");
  auto step = schedule("step", 0.1f);
  throws_with(step, "step_size > 0");
  step.step_size = 5;
  step.gamma = 0.0f;
  throws_with(step, "gamma = 0");
  step.gamma = 1.5f;
  throws_with(step, "gamma = 1.5");
  auto cosine = schedule("cosine", 0.1f);
  cosine.warmup_steps = 10;
  cosine.total_steps = 10;
  throws_with(cosine, "total_steps = 10 and warmup_steps = 10");
  cosine.total_steps = 11;
  cosine.min_lr = 0.2f;
  throws_with(cosine, "min_lr = 0.2");

  cosine.min_lr = 0.01f;
  CHECK_NOTHROW(validate(cosine));
  step.gamma = 0.1f;
  CHECK_NOTHROW(validate(step));
  CHECK_NOTHROW(validate(schedule("constant", 0.1f)));
}

TEST_CASE("learning-rate scaling with the global batch (Goyal et al)", "[optim][schedule]") {
  CHECK(scale_learning_rate(0.1f, "none", 1024, 128) == 0.1f);
  CHECK(scale_learning_rate(0.1f, "linear", 1024, 128) == Approx(0.8));
  CHECK(scale_learning_rate(0.1f, "linear", 64) == Approx(0.05));  // reference 128
  CHECK(scale_learning_rate(0.1f, "sqrt", 512, 128) == Approx(0.2));
  CHECK(scale_learning_rate(0.1f, "sqrt", 128, 128) == Approx(0.1));
  CHECK_THROWS_WITH(scale_learning_rate(0.1f, "square", 128, 128),
                    Catch::Contains("unknown --lr-scaling 'square'"));
  CHECK_THROWS_AS(scale_learning_rate(0.1f, "linear", 0, 128), UsageError);
  CHECK_THROWS_AS(scale_learning_rate(0.1f, "linear", 128, 0), UsageError);
}

}  // namespace
}  // namespace ringtrain
