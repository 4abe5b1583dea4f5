// n = 0 is a legal batch (a rank with no samples this step): every layer's forward and
// backward run without touching memory, parameter gradients become zero (backward
// overwrites them), and a cross-rank BatchNorm still makes both of its collective calls.
#include <catch2/catch.hpp>
#include <memory>

#include "layer_rig.hpp"
#include "ringtrain/framework/layers/batchnorm.hpp"
#include "ringtrain/framework/layers/conv2d.hpp"
#include "ringtrain/framework/layers/dropout.hpp"
#include "ringtrain/framework/layers/flatten.hpp"
#include "ringtrain/framework/layers/linear.hpp"
#include "ringtrain/framework/layers/maxpool2d.hpp"
#include "ringtrain/framework/layers/relu.hpp"

using namespace ringtrain;
using namespace ringtrain::testing;

namespace {

// A world of one rank that counts its collective calls.
class CountingSum final : public CrossRankSum {
 public:
  void sum(std::span<double>) const override { ++calls; }
  mutable int calls = 0;
};

}  // namespace

TEST_CASE("every layer accepts an empty batch", "[empty]") {
  struct Case {
    std::string name;
    std::unique_ptr<Layer> layer;
    Shape input;
  };
  std::vector<Case> cases;
  cases.push_back({"linear", std::make_unique<Linear>(6, 4), {6}});
  cases.push_back({"relu", std::make_unique<ReLU>(), {2, 3}});
  cases.push_back({"conv2d", std::make_unique<Conv2d>(2, 3, 3, 1, 1), {2, 5, 5}});
  cases.push_back({"conv2d 1x1", std::make_unique<Conv2d>(2, 3, 1), {2, 5, 5}});
  cases.push_back({"maxpool2d", std::make_unique<MaxPool2d>(2), {2, 4, 4}});
  cases.push_back({"flatten", std::make_unique<Flatten>(), {2, 4, 4}});
  cases.push_back({"dropout", std::make_unique<Dropout>(0.5f), {8}});
  cases.push_back({"batchnorm 2-D", std::make_unique<BatchNorm>(4), {4}});
  cases.push_back({"batchnorm 4-D", std::make_unique<BatchNorm>(2), {2, 3, 3}});

  std::mt19937 rng(51);
  for (Case& c : cases) {
    for (bool training : {true, false}) {
      INFO(c.name << (training ? " (training)" : " (eval)"));
      LayerRig rig(*c.layer, c.input, 3, rng);
      CountingSum counter;
      StepContext ctx;
      ctx.training = training;
      ctx.cross_rank = &counter;
      // Spans sized for max_batch but n = 0: nothing may be read or written.
      std::vector<float> x(rig.in_size(3), 1.0f), y(rig.out_size(3), -5.0f);
      std::vector<float> dy(rig.out_size(3), 1.0f), dx(rig.in_size(3), -5.0f);
      REQUIRE_NOTHROW(c.layer->forward(x, y, 0, ctx));
      REQUIRE_NOTHROW(c.layer->backward(x, y, dy, dx, 0, ctx));
      REQUIRE_NOTHROW(c.layer->forward({}, {}, 0, ctx));
      REQUIRE_NOTHROW(c.layer->backward({}, {}, {}, {}, 0, ctx));
      CHECK(y == std::vector<float>(y.size(), -5.0f));
      CHECK(dx == std::vector<float>(dx.size(), -5.0f));
      for (const auto& g : rig.grads) CHECK(g == std::vector<float>(g.size(), 0.0f));
      const bool collective = training && c.layer->kind() == "batchnorm";
      CHECK(counter.calls == (collective ? 4 : 0));
    }
  }
}
