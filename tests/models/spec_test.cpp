// Model specs (spec.hpp): what a [[layers]] list parses to, its canonical form, the shapes a
// spec infers, the flag edits of the built-in models, and every refusal of a bad spec: one
// message naming the source, the layer, its line and the key.
#include "ringtrain/models/spec.hpp"

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <string>

#include "ringtrain/framework/error.hpp"
#include "spec_texts.hpp"

using namespace ringtrain;
using namespace ringtrain::models;
using ringtrain::testing::kAllTypes;

namespace {

// The message parse_model_spec (or, with `input`, infer_shapes) throws for `text`.
std::string refusal(const std::string& text, const Shape& input = {}, std::size_t classes = 10) {
  try {
    const ModelSpec spec = parse_model_spec(text, "net.toml");
    if (input.empty()) return "accepted";
    infer_shapes(spec, input, classes);
    return "accepted";
  } catch (const UsageError& e) {
    return e.what();
  }
}

std::string layer(const std::string& body) {
  return "[[layers]]\n" + body + "\n";
}

}  // namespace

TEST_CASE("a spec with every layer type parses to its layers, defaults filled in",
          "[models][spec]") {
  const ModelSpec spec = parse_model_spec(kAllTypes, "all.toml");
  REQUIRE(spec.layers.size() == 7);
  const LayerSpec& conv = spec.layers[0];
  CHECK((conv.type == LayerType::kConv2d && conv.out == 6 && conv.kernel == 3 && conv.stride == 1 &&
         conv.padding == 1 && conv.line == 2));
  CHECK(spec.layers[1].type == LayerType::kBatchNorm);
  CHECK(spec.layers[1].line == 8);
  const LayerSpec& pool = spec.layers[3];
  CHECK((pool.type == LayerType::kMaxPool2d && pool.kernel == 3 && pool.stride == 2));
  CHECK((spec.layers[4].type == LayerType::kDropout && spec.layers[4].p == 0.25f));
  CHECK(spec.layers[5].type == LayerType::kFlatten);
  CHECK((spec.layers[6].type == LayerType::kLinear && spec.layers[6].out == kOutClasses));
  // maxpool2d's stride defaults to its kernel
  CHECK(parse_model_spec(layer("type = \"maxpool2d\"\nkernel = 4"), "s").layers[0].stride == 4);
}

TEST_CASE("the canonical TOML of a spec parses back to the same layers", "[models][spec]") {
  const ModelSpec spec = parse_model_spec(kAllTypes, "all.toml");
  const ModelSpec again = parse_model_spec(to_toml(spec), "canonical");
  REQUIRE(again.layers.size() == spec.layers.size());
  for (std::size_t i = 0; i < spec.layers.size(); ++i) {
    LayerSpec a = spec.layers[i], b = again.layers[i];
    a.line = b.line = 0;
    CHECK(a == b);
  }
  CHECK(to_toml(again) == to_toml(spec));
}

TEST_CASE("shapes and parameter counts follow from the sample shape", "[models][spec]") {
  const ModelSpec spec = parse_model_spec(kAllTypes, "all.toml");
  const auto shapes = infer_shapes(spec, {2, 9, 8}, 5);
  REQUIRE(shapes.size() == 7);
  CHECK(shapes[0].output == Shape{6, 9, 8});
  CHECK(shapes[0].parameters == 6 * 2 * 3 * 3 + 6);
  CHECK(shapes[1].parameters == 12);          // batchnorm: weight and bias per channel
  CHECK(shapes[3].output == Shape{6, 4, 3});  // (9 - 3) / 2 + 1, (8 - 3) / 2 + 1
  CHECK(shapes[5].output == Shape{72});
  CHECK(shapes[6].output == Shape{5});
  CHECK(shapes[6].parameters == 5 * 72 + 5);
  // the model built from it has the same shapes, and the canonical spec attached
  auto model = build_model(spec, {2, 9, 8}, 5);
  model->plan({2, 9, 8}, 2);
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    CHECK(model->layer_output_shape(i) == shapes[i].output);
    CHECK(model->layer_parameters(i) == shapes[i].parameters);
  }
  CHECK(model->spec() == to_toml(spec));
  // batchnorm after a linear layer: (C) samples
  CHECK(infer_shapes(
            parse_model_spec(layer("type = \"linear\"\nout = 4") + layer("type = \"batchnorm\"") +
                                 layer("type = \"linear\"\nout = 3"),
                             "s"),
            {7}, 3)[1]
            .parameters == 8);
}

TEST_CASE("the flags' edits: hidden widths of an MLP, dropout after hidden ReLUs",
          "[models][spec]") {
  const ModelSpec mlp =
      parse_model_spec(layer("type = \"linear\"\nout = 8") + layer("type = \"relu\"") +
                           layer("type = \"linear\"\nout = \"classes\""),
                       "mlp");
  const ModelSpec wide = with_hidden_widths(mlp, {5, 6});
  REQUIRE(wide.layers.size() == 5);
  CHECK((wide.layers[0].out == 5 && wide.layers[2].out == 6 && wide.layers[4].out == kOutClasses));
  CHECK(with_hidden_widths(mlp, {}).layers.size() == 1);
  CHECK_THROWS_WITH(with_hidden_widths(mlp, {0}), Catch::Contains("--mlp-hidden 0"));
  const ModelSpec dropped = with_dropout(wide, 0.5f);
  REQUIRE(dropped.layers.size() == 7);
  CHECK((dropped.layers[2].type == LayerType::kDropout && dropped.layers[2].p == 0.5f));
  CHECK(dropped.layers[5].type == LayerType::kDropout);
  CHECK(with_dropout(wide, 0.0f).layers.size() == 5);
  // a ReLU after a convolution gets none
  const ModelSpec conv = parse_model_spec(kAllTypes, "all.toml");
  CHECK(with_dropout(conv, 0.5f).layers.size() == conv.layers.size());
  CHECK_THROWS_AS(with_hidden_widths(conv, {4}), UsageError);
}

TEST_CASE("a bad spec is refused in one line naming the file, layer, line and key",
          "[models][spec][errors]") {
  struct Case {
    std::string text, expected;
  };
  const std::string relu = layer("type = \"relu\"");
  const Case cases[] = {
      {"[[layers]\ntype = \"relu\"", "net.toml line 1:"},  // TOML syntax
      {"", "net.toml: no layers"},
      {"layers = []", "net.toml: the layer list is empty"},
      {"layers = 3", "net.toml line 1: `layers` must be [[layers]] tables"},
      {"name = \"x\"\n" + relu, "net.toml line 1: unknown key 'name'"},
      {relu + layer("out = 3"), "net.toml: layer 1 (line 3): no `type` key"},
      {layer("type = 3"), "layer 0 (line 2): key 'type' must be a string"},
      {relu + layer("type = \"conv3d\""), "layer 1 (line 4): unknown layer type 'conv3d'"},
      {layer("type = \"a\\nb\""), "unknown layer type 'a\\x0ab'"},  // still one line
      {layer("type = \"linear\"\nwidth = 3"), "layer 0 (linear, line 3): unknown key 'width'"},
      {layer("type = \"relu\"\np = 0.5"),
       "layer 0 (relu, line 3): unknown key 'p' (relu takes no keys)"},
      {layer("type = \"conv2d\"\nout = 4"), "layer 0 (conv2d, line 1): key 'kernel' is missing"},
      {layer("type = \"linear\""), "layer 0 (linear, line 1): key 'out' is missing"},
      {layer("type = \"linear\"\nout = \"ten\""),
       "key 'out' must be a whole number or \"classes\""},
      {layer("type = \"linear\"\nout = 2.5"),
       "layer 0 (linear, line 3): key 'out' must be a whole number"},
      {layer("type = \"linear\"\nout = 0"), "key 'out' = 0 is outside [1, 65536]"},
      {layer("type = \"linear\"\nout = 10000000000"),
       "key 'out' = 10000000000 is outside [1, 65536]"},
      {layer("type = \"conv2d\"\nout = 4\nkernel = 0"), "key 'kernel' = 0 is outside [1, 1024]"},
      {layer("type = \"conv2d\"\nout = 4\nkernel = 3\nstride = 0"), "key 'stride' = 0 is outside"},
      {layer("type = \"conv2d\"\nout = 4\nkernel = 3\npadding = -1"),
       "key 'padding' = -1 is outside [0, 1024]"},
      {layer("type = \"maxpool2d\"\nkernel = true"), "key 'kernel' must be a whole number"},
      {layer("type = \"dropout\""), "layer 0 (dropout, line 1): key 'p' is missing"},
      {layer("type = \"dropout\"\np = 1.0"), "key 'p' = 1 is outside [0, 1)"},
      {layer("type = \"dropout\"\np = nan"), "key 'p' = nan is outside [0, 1)"},
      {layer("type = \"dropout\"\np = \"half\""), "key 'p' must be a number"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    const std::string message = refusal(c.text);
    CHECK_THAT(message, Catch::Contains(c.expected));
    CHECK(message.find('\n') == std::string::npos);
  }
  std::string many;
  for (std::size_t i = 0; i <= kMaxLayers; ++i) many += relu;
  CHECK_THAT(refusal(many), Catch::Contains("net.toml: 257 layers, at most 256"));
}

TEST_CASE("a spec that does not fit the data is refused naming the layer",
          "[models][spec][errors]") {
  struct Case {
    std::string text;
    Shape input;
    std::string expected;
  };
  const std::string head = layer("type = \"linear\"\nout = \"classes\"");
  const std::string conv3 = layer("type = \"conv2d\"\nout = 4\nkernel = 3");
  const std::string classes = layer("type = \"flatten\"") + head;
  const Case cases[] = {
      {conv3 + classes,
       {784},
       "layer 0 (conv2d, line 1): takes samples of shape (C, H, W), not (784)"},
      {layer("type = \"maxpool2d\"\nkernel = 2") + classes,
       {2, 5},
       "layer 0 (maxpool2d, line 1): takes samples of shape (C, H, W), not (2, 5)"},
      {layer("type = \"batchnorm\"") + classes,
       {2, 5},
       "layer 0 (batchnorm, line 1): takes samples of shape (C) or (C, H, W), not (2, 5)"},
      {conv3 + classes,
       {1, 2, 9},
       "layer 0 (conv2d, line 1): kernel 3 is larger than its input (1, 2, 9)"},
      {layer("type = \"conv2d\"\nout = 4\nkernel = 5\npadding = 1") + classes,
       {1, 2, 9},
       "kernel 5 is larger than its input (1, 2, 9) padded by 1"},
      {conv3 + layer("type = \"maxpool2d\"\nkernel = 4") + classes,
       {1, 5, 5},
       "layer 1 (maxpool2d, line 5): kernel 4 is larger than its input (4, 3, 3)"},
      {layer("type = \"linear\"\nout = 12"),
       {1, 28, 28},
       "layer 0 (linear, line 1): the model's output (12) holds 12 values per sample, but the "
       "data has 10 classes; set out = 10"},
      {layer("type = \"linear\"\nout = 65536") + layer("type = \"linear\"\nout = 65536") + head,
       {8},  // 8·65536 + 65536 + 65536·65536 + 65536
       "layer 1 (linear, line 4): the layers so far hold 4295622656 parameters"},
      {layer("type = \"conv2d\"\nout = 65536\nkernel = 1") + classes,
       {1, 64, 64},
       "layer 0 (conv2d, line 1): output (65536, 64, 64): the layers so far hold"},
      {layer("type = \"conv2d\"\nout = 1\nkernel = 64") + classes,
       {64, 128, 128},
       "its column matrix (C·k·k = 262144 by Ho·Wo = 4225) exceeds"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    CHECK_THAT(refusal(c.text, c.input),
               Catch::Contains(c.expected) && Catch::StartsWith("net.toml: "));
  }
  // A layer after the last linear that keeps its width is fine.
  CHECK(refusal(head + layer("type = \"relu\""), {3}) == "accepted");
}
