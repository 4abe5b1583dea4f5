// Facts every optimizer must keep, whatever its rule:
//   - range property: an optimizer over [a, b) of a buffer gives, bit for bit, the result of
//     one over the whole buffer restricted to [a, b) (what ZeRO-1 shards rely on);
//   - resume: copying state() and step_count() into a fresh optimizer continues the same
//     computation bit for bit (what checkpoints rely on);
//   - thread count: a step split over 2 or 3 threads gives, bit for bit, the 1-thread step;
//   - empty ranges work; wrong extents and invalid configurations throw UsageError.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <utility>
#include <vector>

#include "ringtrain/framework/blas.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/optim/optimizer.hpp"

namespace ringtrain {
namespace {

// Deterministic, position-dependent values so that a misplaced element shows.
std::vector<float> pattern(std::size_t n, float phase) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::sin(0.37f * float(i) + phase);
  return v;
}

std::vector<OptimizerConfig> all_configs() {
  std::vector<OptimizerConfig> configs;
  for (const bool nesterov : {false, true})
    for (const float wd : {0.0f, 0.05f}) {
      OptimizerConfig c;
      c.nesterov = nesterov;
      c.weight_decay = wd;
      configs.push_back(c);
    }
  OptimizerConfig plain;
  plain.momentum = 0.0f;
  configs.push_back(plain);
  for (const float wd : {0.0f, 0.05f}) {
    OptimizerConfig c;
    c.name = "adamw";
    c.weight_decay = wd;
    configs.push_back(c);
  }
  return configs;
}

TEST_CASE("an optimizer over a sub-range equals the whole-buffer one restricted to it", "[optim]") {
  constexpr std::size_t kN = 1003;  // odd, so vector loops have remainders
  for (const auto& config : all_configs()) {
    INFO(make_optimizer(config, 1)->describe());
    // [a, b) pairs: unaligned start, aligned, empty, one element, the tail.
    for (const auto& [a, b] : std::vector<std::pair<std::size_t, std::size_t>>{
             {3, 517}, {16, 512}, {40, 40}, {999, 1000}, {500, kN}}) {
      INFO("range [" << a << ", " << b << ")");
      auto whole = make_optimizer(config, kN);
      auto part = make_optimizer(config, b - a);
      std::vector<float> p_whole = pattern(kN, 0.0f);
      std::vector<float> p_part = p_whole;
      for (int s = 0; s < 4; ++s) {
        const std::vector<float> g = pattern(kN, 1.0f + float(s));
        const float lr = 0.05f * float(s + 1);
        whole->step(p_whole, g, lr);
        part->step(std::span(p_part).subspan(a, b - a), std::span(g).subspan(a, b - a), lr);
      }
      bool same = true;
      for (std::size_t i = a; i < b; ++i) same = same && p_whole[i] == p_part[i];
      CHECK(same);
      const auto sw = whole->state();
      const auto sp = part->state();
      REQUIRE(sw.size() == sp.size());
      for (std::size_t k = 0; k < sw.size(); ++k) {
        REQUIRE(sp[k].values.size() == b - a);
        bool same_state = true;
        for (std::size_t i = a; i < b; ++i)
          same_state = same_state && sw[k].values[i] == sp[k].values[i - a];
        CHECK(same_state);
      }
    }
  }
}

TEST_CASE("a step split over the rank's threads equals the 1-thread step, bit for bit", "[optim]") {
  // Sizes: below one part (no split), two and three parts with remainders, not a multiple
  // of the 16-float alignment of the part boundaries.
  for (const std::size_t n : {std::size_t{1000}, std::size_t{131'072 + 7}, std::size_t{300'001}}) {
    for (const auto& config : all_configs()) {
      INFO(make_optimizer(config, 1)->describe() << ", " << n << " elements");
      std::vector<std::vector<float>> results;
      std::vector<std::vector<float>> states;
      for (const int threads : {1, 2, 3}) {
        blas::ScopedThreads budget(threads);
        auto opt = make_optimizer(config, n);
        CHECK(opt->planned_parts() ==
              std::min<std::size_t>(std::size_t(threads), n / 65'536 > 0 ? n / 65'536 : 1));
        std::vector<float> p = pattern(n, 0.25f);
        for (int s = 0; s < 3; ++s) opt->step(p, pattern(n, 2.0f + float(s)), 0.05f);
        results.push_back(p);
        states.push_back({});
        for (const auto& view : opt->state())
          states.back().insert(states.back().end(), view.values.begin(), view.values.end());
      }
      CHECK(results[0] != pattern(n, 0.25f));  // the steps moved the parameters
      CHECK(results[1] == results[0]);
      CHECK(results[2] == results[0]);
      CHECK(states[1] == states[0]);
      CHECK(states[2] == states[0]);
    }
  }
}

// What the trainer does with buckets: one step applied in pieces, in backward order (last
// piece first), each piece updated as soon as its reduction completes.
TEST_CASE("one step applied in pieces, in any order, equals step() bit for bit", "[optim]") {
  constexpr std::size_t kN = 1003;
  // Piece boundaries: unaligned, one element, an empty piece, the tail.
  const std::vector<std::size_t> cuts = {0, 5, 6, 6, 300, 512, 1000, kN};
  for (const auto& config : all_configs()) {
    INFO(make_optimizer(config, 1)->describe());
    auto whole = make_optimizer(config, kN);
    auto pieces = make_optimizer(config, kN);
    std::vector<float> p_whole = pattern(kN, 0.25f);
    std::vector<float> p_pieces = p_whole;
    for (int s = 0; s < 4; ++s) {
      const std::vector<float> g = pattern(kN, 2.0f + float(s));
      const float lr = 0.03f * float(s + 1);
      whole->step(p_whole, g, lr);
      pieces->begin_step();
      for (std::size_t k = cuts.size() - 1; k-- > 0;) {
        const std::size_t a = cuts[k], n = cuts[k + 1] - cuts[k];
        pieces->update(a, std::span(p_pieces).subspan(a, n), std::span(g).subspan(a, n), lr);
      }
    }
    CHECK(pieces->step_count() == whole->step_count());
    CHECK(std::equal(p_whole.begin(), p_whole.end(), p_pieces.begin()));
    const auto sw = whole->state(), sp = pieces->state();
    for (std::size_t k = 0; k < sw.size(); ++k)
      CHECK(std::equal(sw[k].values.begin(), sw[k].values.end(), sp[k].values.begin()));
  }
}

TEST_CASE("an update outside the range or before begin_step throws UsageError", "[optim]") {
  auto opt = make_optimizer(OptimizerConfig{}, 10);
  std::vector<float> p(4), g(4);
  CHECK_THROWS_WITH(opt->update(0, p, g, 0.1f), Catch::Contains("before begin_step"));
  opt->begin_step();
  CHECK_NOTHROW(opt->update(6, p, g, 0.1f));
  CHECK_THROWS_WITH(opt->update(7, p, g, 0.1f), Catch::Contains("at offset 7"));
  CHECK_THROWS_AS(opt->update(0, p, std::span(g).first(3), 0.1f), UsageError);
}

TEST_CASE("restoring state() and step_count() resumes the same computation", "[optim]") {
  constexpr std::size_t kN = 97;
  for (const auto& config : all_configs()) {
    INFO(make_optimizer(config, 1)->describe());
    auto straight = make_optimizer(config, kN);
    auto first = make_optimizer(config, kN);
    std::vector<float> p_straight = pattern(kN, 0.5f);
    std::vector<float> p_resumed = p_straight;
    for (int s = 0; s < 5; ++s) straight->step(p_straight, pattern(kN, float(s)), 0.1f);

    for (int s = 0; s < 2; ++s) first->step(p_resumed, pattern(kN, float(s)), 0.1f);
    // "Checkpoint": copy the state out, build a fresh optimizer, copy it in.
    auto resumed = make_optimizer(config, kN);
    const auto saved = first->state();
    const auto target = resumed->state();
    REQUIRE(saved.size() == target.size());
    for (std::size_t k = 0; k < saved.size(); ++k) {
      REQUIRE(saved[k].name == target[k].name);
      std::copy(saved[k].values.begin(), saved[k].values.end(), target[k].values.begin());
    }
    resumed->set_step_count(first->step_count());
    for (int s = 2; s < 5; ++s) resumed->step(p_resumed, pattern(kN, float(s)), 0.1f);

    CHECK(p_resumed == p_straight);
    CHECK(resumed->step_count() == 5);
  }
}

TEST_CASE("an optimizer over an empty range steps without touching anything", "[optim]") {
  for (const auto& config : all_configs()) {
    auto opt = make_optimizer(config, 0);
    opt->step({}, {}, 0.1f);
    CHECK(opt->step_count() == 1);
    for (const auto& view : opt->state()) CHECK(view.values.empty());
  }
}

TEST_CASE("a step on spans of the wrong length throws UsageError", "[optim]") {
  auto opt = make_optimizer(OptimizerConfig{}, 4);
  std::vector<float> p(4), g(4), short_g(3);
  CHECK_THROWS_AS(opt->step(p, short_g, 0.1f), UsageError);
  CHECK_THROWS_WITH(opt->step(p, short_g, 0.1f), Catch::Contains("4 params and 3 grads"));
  CHECK(opt->step_count() == 0);  // a rejected step is not counted
}

TEST_CASE("invalid optimizer configurations throw UsageError with the value", "[optim]") {
  auto with = [](auto edit) {
    OptimizerConfig c;
    edit(c);
    return c;
  };
  auto throws_with = [](const OptimizerConfig& c, const std::string& text) {
    CHECK_THROWS_AS(make_optimizer(c, 1), UsageError);
    CHECK_THROWS_WITH(make_optimizer(c, 1), Catch::Contains(text));
  };
  throws_with(with([](auto& c) { c.name = "adam"; }), "unknown optimizer 'adam'");
  throws_with(with([](auto& c) { c.momentum = 1.0f; }), "momentum = 1");
  throws_with(with([](auto& c) { c.momentum = -0.1f; }), "momentum = -0.1");
  throws_with(with([](auto& c) { c.momentum = NAN; }), "momentum = nan");
  throws_with(with([](auto& c) {
                c.momentum = 0.0f;
                c.nesterov = true;
              }),
              "nesterov");
  throws_with(with([](auto& c) { c.weight_decay = -1e-4f; }), "weight_decay = -0.0001");
  throws_with(with([](auto& c) {
                c.name = "adamw";
                c.beta1 = 1.0f;
              }),
              "beta1 = 1");
  throws_with(with([](auto& c) {
                c.name = "adamw";
                c.beta2 = -0.5f;
              }),
              "beta2 = -0.5");
  throws_with(with([](auto& c) {
                c.name = "adamw";
                c.eps = 0.0f;
              }),
              "eps = 0");
  throws_with(with([](auto& c) {
                c.name = "adamw";
                c.weight_decay = INFINITY;
              }),
              "weight_decay = inf");

  CHECK_NOTHROW(make_optimizer(with([](auto& c) { c.momentum = 0.0f; }), 1));
  CHECK_NOTHROW(make_optimizer(with([](auto& c) {
                                 c.name = "adamw";
                                 c.beta1 = 0.0f;
                               }),
                               1));
}

}  // namespace
}  // namespace ringtrain
