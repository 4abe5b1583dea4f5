// The built-in models as spec files build exactly the models the hand-written builders of
// models/ built before (kept here as the reference): the same layers in the same order, the
// same parameter and buffer names, and, from one seed, bitwise the same initial parameters,
// outputs and gradients. So old checkpoints still resume and runs give the same bits.
#include <catch2/catch.hpp>
#include <cstring>
#include <memory>
#include <random>

#include "reference_models.hpp"
#include "ringtrain/models/registry.hpp"

using namespace ringtrain;
using models::ModelOptions;
using testing::reference_cnn;
using testing::reference_mlp;

namespace {

// (An empty span may have a null data(), which memcmp must not get.)
bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Plans both for 3 rows, initializes from one seed, runs one training forward and backward
// on the same input and sample ids, and compares everything a run or a checkpoint sees.
void require_identical(Sequential& spec_built, Sequential& reference, const Shape& input,
                       std::size_t classes) {
  const std::size_t n = 3;
  spec_built.plan(input, n);
  reference.plan(input, n);
  REQUIRE(spec_built.num_layers() == reference.num_layers());
  for (std::size_t i = 0; i < reference.num_layers(); ++i)
    CHECK(spec_built.layer(i).kind() == reference.layer(i).kind());
  const auto& a = spec_built.parameters().entries();
  const auto& b = reference.parameters().entries();
  REQUIRE(a.size() == b.size());
  for (std::size_t p = 0; p < a.size(); ++p) {
    CHECK(a[p].name == b[p].name);
    CHECK(a[p].shape == b[p].shape);
  }
  REQUIRE(spec_built.buffers().count() == reference.buffers().count());
  for (std::size_t p = 0; p < reference.buffers().count(); ++p)
    CHECK(spec_built.buffers().entry(p).name == reference.buffers().entry(p).name);
  spec_built.initialize(77);
  reference.initialize(77);
  CHECK(same_bits(spec_built.parameters().values(), reference.parameters().values()));

  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::vector<float> x(n * num_elements(input)), dlogits(n * classes);
  for (float& v : x) v = normal(rng);
  for (float& v : dlogits) v = normal(rng);
  const std::vector<std::uint64_t> ids = {4, 17, 9};
  StepContext ctx;
  ctx.seed = 11;
  ctx.sample_ids = ids;
  CHECK(same_bits(spec_built.forward(x, n, ctx), reference.forward(x, n, ctx)));
  spec_built.backward(dlogits, n, ctx);
  reference.backward(dlogits, n, ctx);
  CHECK(same_bits(spec_built.parameters().grads(), reference.parameters().grads()));
  CHECK(same_bits(spec_built.buffers().values(), reference.buffers().values()));
}

}  // namespace

TEST_CASE("mlp from its spec file is the hand-built mlp, with --mlp-hidden and --dropout",
          "[models][builtin]") {
  ModelOptions options;  // Fashion-MNIST, 784-1024-1024-10
  require_identical(*models::make_model("mlp", options), *reference_mlp(options), options.input,
                    options.classes);
  options.mlp_hidden = {48, 32, 24};
  options.dropout = 0.3f;
  options.input = {3, 4, 5};
  options.classes = 7;
  require_identical(*models::make_model("mlp", options), *reference_mlp(options), options.input,
                    options.classes);
  options.mlp_hidden = {};  // no hidden layer: one linear
  require_identical(*models::make_model("mlp", options), *reference_mlp(options), options.input,
                    options.classes);
}

TEST_CASE("cnn and cnn-bn from their spec files are the hand-built ones", "[models][builtin]") {
  for (const bool batch_norm : {false, true}) {
    const std::string name = batch_norm ? "cnn-bn" : "cnn";
    INFO(name);
    ModelOptions options;  // Fashion-MNIST, Winograd for the second convolution (kAuto)
    require_identical(*models::make_model(name, options), *reference_cnn(options, batch_norm),
                      options.input, options.classes);
    options.input = {3, 9, 11};
    options.classes = 2;
    options.dropout = 0.5f;
    options.conv_algorithm = Conv2d::Algorithm::kIm2col;
    require_identical(*models::make_model(name, options), *reference_cnn(options, batch_norm),
                      options.input, options.classes);
    CHECK(models::has_batch_norm(name) == batch_norm);
  }
}

TEST_CASE("the cnn refuses samples it cannot take, as before: not (C, H, W), or H, W < 4",
          "[models][builtin]") {
  ModelOptions options;
  options.input = {784};
  CHECK_THROWS_WITH(models::make_model("cnn", options),
                    Catch::Contains("model cnn: layer 0 (conv2d, line 7): takes samples of "
                                    "shape (C, H, W), not (784)"));
  for (std::size_t side = 1; side <= 5; ++side) {
    options.input = {1, side, 4};
    INFO("H = " << side);
    if (side >= 4)
      CHECK_NOTHROW(models::make_model("cnn-bn", options));
    else
      CHECK_THROWS_AS(models::make_model("cnn-bn", options), UsageError);
  }
}
