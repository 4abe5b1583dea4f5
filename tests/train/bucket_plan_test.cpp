// BucketPlan's pure logic (bucket_plan.hpp), exhaustively over small models and without MPI:
// backward is simulated layer by layer, and after each layer exactly the buckets whose every
// parameter has been written are ready, and they are the first ready_after(layer) buckets.
#include "train/sum/bucket_plan.hpp"

#include <fmt/format.h>

#include <catch2/catch.hpp>

#include "ringtrain/framework/error.hpp"

using namespace ringtrain;

namespace {

std::vector<ParameterEntry> entries(const std::vector<std::size_t>& sizes,
                                    const std::vector<std::size_t>& layers) {
  std::vector<ParameterEntry> out(sizes.size());
  std::size_t offset = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    out[i].name = fmt::format("p{}", i);
    out[i].offset = offset;
    out[i].size = sizes[i];
    out[i].layer = layers[i];
    offset += sizes[i];
  }
  return out;
}

// "" if the plan is right for backward over layers [0, last layer], else the first failure.
std::string check_ready(const std::vector<ParameterEntry>& params, const BucketPlan& plan) {
  const std::size_t last_layer = params.empty() ? 0 : params.back().layer;
  for (std::size_t b = 0; b < plan.size(); ++b) {
    const collectives::Bucket& k = plan.buckets()[b];
    if (plan.ready_layer(b) != params[k.first_parameter].layer) return "ready layer";
  }
  // Backward has finished layers last_layer, ..., layer: parameter p is written iff its
  // layer >= `layer`. A bucket is ready iff all its parameters are written.
  for (std::size_t layer = last_layer + 1; layer-- > 0;) {
    std::size_t ready = 0;
    bool prefix = true, gap = false;  // prefix: no ready bucket after one that is not
    for (const collectives::Bucket& k : plan.buckets()) {
      bool all_written = true;
      for (std::size_t p = k.first_parameter; p < k.first_parameter + k.parameters; ++p)
        all_written = all_written && params[p].layer >= layer;
      if (all_written) {
        prefix = prefix && !gap;
        ++ready;
      } else {
        gap = true;
      }
    }
    if (!prefix) return fmt::format("layer {}: ready buckets are not a prefix", layer);
    if (plan.ready_after(layer) != ready)
      return fmt::format("layer {}: ready_after {} but {} buckets are written", layer,
                         plan.ready_after(layer), ready);
  }
  return "";
}

}  // namespace

TEST_CASE("the worked example: buckets and their ready layers") {
  // Layers 0 (linear), 1 (relu), 2 (linear): w0 b0 w2 b2, with 4, 2, 6, 3 floats.
  const auto params = entries({4, 2, 6, 3}, {0, 0, 2, 2});
  const BucketPlan plan(params, 6 * sizeof(float));  // b2 | w2 | w0 b0
  REQUIRE(plan.size() == 3);
  CHECK(plan.buckets()[0].first_parameter == 3);
  CHECK(plan.buckets()[1].first_parameter == 2);
  CHECK(plan.buckets()[2].first_parameter == 0);
  CHECK(plan.ready_layer(0) == 2);
  CHECK(plan.ready_layer(1) == 2);
  CHECK(plan.ready_layer(2) == 0);
  CHECK(plan.ready_after(2) == 2);
  CHECK(plan.ready_after(1) == 2);  // the relu writes nothing
  CHECK(plan.ready_after(0) == 3);
  CHECK(plan.ready_after(3) == 0);  // no layer 3: as before backward, nothing is written
}

TEST_CASE("after each layer of backward, exactly the written buckets are ready, as a prefix") {
  // Every model of up to 5 parameters with sizes in {0, 1, 4} floats, each parameter in the
  // same layer as the one before or 1 or 2 layers later (layers without parameters between),
  // for caps of 1, 2 and 5 floats.
  std::size_t plans = 0;
  for (std::size_t P = 1; P <= 5; ++P) {
    std::size_t size_codes = 1, step_codes = 1;
    for (std::size_t i = 0; i < P; ++i) size_codes *= 3;
    for (std::size_t i = 1; i < P; ++i) step_codes *= 3;
    for (std::size_t s = 0; s < size_codes; ++s)
      for (std::size_t l = 0; l < step_codes; ++l)
        for (const std::size_t cap_floats : {1, 2, 5}) {
          std::vector<std::size_t> sizes, layers;
          std::size_t sc = s, lc = l, layer = 0;
          for (std::size_t i = 0; i < P; ++i, sc /= 3) {
            sizes.push_back(std::vector<std::size_t>{0, 1, 4}[sc % 3]);
            if (i > 0) layer += lc % 3, lc /= 3;
            layers.push_back(layer);
          }
          const auto params = entries(sizes, layers);
          const BucketPlan plan(params, cap_floats * sizeof(float));
          const std::string why = check_ready(params, plan);
          INFO(fmt::format("sizes {} layers {} cap {} floats", fmt::join(sizes, ","),
                           fmt::join(layers, ","), cap_floats));
          REQUIRE(why.empty());
          ++plans;
        }
  }
  CHECK(plans == 3 * (3 + 9 * 3 + 27 * 9 + 81 * 27 + 243 * 81));
}

TEST_CASE("a cap of 0 bytes is a usage error, and 1 to 3 bytes count as one float") {
  const auto params = entries({2, 3}, {0, 1});
  CHECK_THROWS_AS(BucketPlan(params, 0), UsageError);
  const BucketPlan tiny(params, 1);
  CHECK(tiny.size() == 2);
  CHECK(tiny.cap_bytes() == 1);
}
