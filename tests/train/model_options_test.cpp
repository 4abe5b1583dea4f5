// --conv-algorithm reaches the cnn's convolutions: the flag's three values against the
// algorithm each Conv2d of the built model reports.
#include <catch2/catch.hpp>
#include <string>

#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/layers/conv2d.hpp"
#include "ringtrain/models/registry.hpp"

using namespace ringtrain;

namespace {

// Algorithm names of the model's Conv2d layers, in order, joined by spaces.
std::string conv_algorithms(const TrainConfig& config) {
  auto model = models::make_model(config);
  std::string names;
  for (std::size_t i = 0; i < model->num_layers(); ++i)
    if (auto* conv = dynamic_cast<const Conv2d*>(&model->layer(i))) {
      if (!names.empty()) names += ' ';
      names += conv->algorithm_name();
    }
  return names;
}

}  // namespace

TEST_CASE("the cnn's convolutions run as --conv-algorithm says", "[models]") {
  TrainConfig config;
  config.model = "cnn";
  CHECK(conv_algorithms(config) == "im2col winograd F(4x4,5x5)");  // auto
  config.conv_algorithm = "im2col";
  CHECK(conv_algorithms(config) == "im2col im2col");
  config.conv_algorithm = "winograd";
  CHECK(conv_algorithms(config) == "winograd F(4x4,5x5) winograd F(4x4,5x5)");
  config.conv_algorithm = "fast";
  CHECK_THROWS_AS(config.validate(1), UsageError);
}

TEST_CASE("overlap modes and segments in flight: what validate accepts", "[config]") {
  TrainConfig config;
  for (const std::string overlap : {"on", "off", "alternate"}) {
    config.overlap = overlap;
    CHECK_NOTHROW(config.validate(2));
  }
  config.overlap = "sometimes";
  CHECK_THROWS_AS(config.validate(2), UsageError);
  config.overlap = "on";
  config.segments_in_flight = 64;
  CHECK_NOTHROW(config.validate(2));
  config.segments_in_flight = 65;
  CHECK_THROWS_AS(config.validate(2), UsageError);
}
