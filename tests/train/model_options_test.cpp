// --conv-algorithm reaches the cnn's convolutions: the flag's three values against the
// algorithm each Conv2d of the built model reports. And the option table (options.hpp): every
// option round-trips through config.toml and appears in the manifest's config; modes parse
// by their words; the TOML reader names the file, line and key of a bad entry.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/layers/conv2d.hpp"
#include "ringtrain/framework/train/options.hpp"
#include "ringtrain/framework/train/run_plan.hpp"
#include "ringtrain/models/registry.hpp"

using namespace ringtrain;
using Catch::Matchers::Contains;

namespace {

// Algorithm names of the model's Conv2d layers, in order, joined by spaces.
std::string conv_algorithms(const TrainConfig& config) {
  auto model = models::make_model(config.model, model_options(config, models::input_shape(), 10));
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
  config.conv_algorithm = parse_choice<Conv2d::Algorithm>("im2col", "--conv-algorithm");
  CHECK(conv_algorithms(config) == "im2col im2col");
  config.conv_algorithm = parse_choice<Conv2d::Algorithm>("winograd", "--conv-algorithm");
  CHECK(conv_algorithms(config) == "winograd F(4x4,5x5) winograd F(4x4,5x5)");
  CHECK_THROWS_WITH(parse_choice<Conv2d::Algorithm>("fast", "--conv-algorithm"),
                    "--conv-algorithm fast: choose one of auto, im2col, winograd");
}

TEST_CASE("overlap modes and segments in flight: what validate accepts", "[config]") {
  TrainConfig config;
  for (const std::string overlap : {"on", "off", "alternate"}) {
    config.overlap = parse_choice<Overlap>(overlap, "--overlap");
    CHECK(name_of(config.overlap) == overlap);
    CHECK_NOTHROW(config.validate(2));
  }
  CHECK_THROWS_WITH(parse_choice<Overlap>("sometimes", "--overlap"),
                    "--overlap sometimes: choose one of on, off, alternate");
  config.overlap = Overlap::kOn;
  config.segments_in_flight = 64;
  CHECK_NOTHROW(config.validate(2));
  config.segments_in_flight = 65;
  CHECK_THROWS_AS(config.validate(2), UsageError);
}

namespace {

// A value of `option` other than its default, as text: the next number, another word,
// the switch given, another list, an absolute path, a string no option has by default.
std::string other_value(const TrainOption& option) {
  const std::string text = option.default_text();
  if (option.list) return text == "7,1" ? "7,2" : "7,1";
  if (option.path == PathRule::kPath) return "/data/x,1";
  if (option.path == PathRule::kTomlFile) return "/specs/x,1.toml";
  switch (option.kind) {
    case ValueKind::kWhole:
      return std::to_string(std::stoll(text) + 1);
    case ValueKind::kReal: {  // inside the option's range
      const double v = std::stod(text);
      return fmt::format("{}", v + 0.25 <= option.maximum ? v + 0.25 : v - 0.25);
    }
    case ValueKind::kSwitch:
      return text == "true" ? "false" : "true";
    case ValueKind::kChoice:
      return option.choices.front() != text ? option.choices.front() : option.choices.back();
    case ValueKind::kText:
      break;
  }
  return text + "x,1";
}

}  // namespace

TEST_CASE("options: every option of the table round-trips through config.toml", "[options]") {
  REQUIRE(train_options().size() > 40);
  for (const TrainOption& option : train_options()) {
    INFO(option.flag() << " " << other_value(option));
    TrainConfig written;
    option.set(written, other_value(option));
    REQUIRE(option.get(written) != option.get(TrainConfig{}));  // the value is not the default
    const std::string toml = written.to_toml();
    const bool listed = toml.find("\n" + option.name + " = ") != std::string::npos;
    if (!option.in_config_toml) {  // --run-dir, --resume: a rerun picks its own
      CHECK_FALSE(listed);
      continue;
    }
    CHECK(listed);
    TrainConfig read;
    apply_config_toml(read, toml, "config.toml");
    CHECK(read.to_json() == written.to_json());
  }
}

TEST_CASE("options: config.toml travels: paths absolute, relative ones from the file's folder",
          "[options]") {
  TrainConfig written;
  written.data_dir = "data/d.h5";
  written.model = "specs/m.toml";
  written.cost_model = "../fit.json";
  written.mlp_hidden = "64,32";
  const std::string toml = written.to_toml();
  const auto absolute = [](const char* p) {
    return std::filesystem::absolute(p).lexically_normal().string();
  };
  CHECK_THAT(toml, Contains("\ndata = \"" + absolute("data/d.h5") + "\"\n"));
  CHECK_THAT(toml, Contains("\nmodel = \"" + absolute("specs/m.toml") + "\"\n"));
  CHECK_THAT(toml, Contains("\ncost-model = \"" + absolute("../fit.json") + "\"\n"));
  CHECK_THAT(toml, Contains("\nmlp-hidden = [64, 32]\n"));
  // A built-in model's name is not a path.
  CHECK_THAT(TrainConfig{}.to_toml(), Contains("\nmodel = \"mlp\"\n"));
  // Read from a file in /runs/a: relative paths from there; lists in either form.
  TrainConfig read;
  apply_config_toml(read,
                    "data = \"d.h5\"\nmodel = \"../m.toml\"\ncheckpoint-key = \"/k/key\"\n"
                    "mlp-hidden = [8, 4]\nlocal-batches = \"3,5\"\n",
                    "/runs/a/run.toml");
  CHECK(read.data_dir == "/runs/a/d.h5");
  CHECK(read.model == "/runs/m.toml");
  CHECK(read.checkpoint_key == "/k/key");
  CHECK(read.mlp_hidden == "8,4");
  CHECK(read.local_batches == "3,5");
  apply_config_toml(read, "model = \"cnn\"\n", "/runs/a/run.toml");
  CHECK(read.model == "cnn");
  CHECK_THROWS_WITH(apply_config_toml(read, "mlp-hidden = [8, 4.5]\n", "run.toml"),
                    Contains("run.toml line 1: value of 'mlp-hidden': an array holds whole "
                             "numbers only"));
}

TEST_CASE("options: config.toml only writes switches that are on", "[options]") {
  // A switch's default must be off: the file cannot say "off" for a switch that is on.
  for (const TrainOption& option : train_options())
    if (option.kind == ValueKind::kSwitch) CHECK(option.default_text() == "false");
}

TEST_CASE("options: the manifest's config has every option of the table, and nothing else",
          "[options]") {
  const nlohmann::json json = TrainConfig{}.to_json();
  for (const TrainOption& option : train_options()) {
    INFO(option.flag());
    REQUIRE(json.contains(option.name));
    CHECK(json[option.name] == option.get(TrainConfig{}));
  }
  CHECK(json.size() == train_options().size());
}

TEST_CASE("options: names are unique and every mode lists its words in --help", "[options]") {
  for (const TrainOption& option : train_options()) {
    INFO(option.flag());
    CHECK(find_train_option(option.name) == &option);
    CHECK_FALSE(option.help.empty());
    if (option.kind == ValueKind::kChoice) {
      std::string list;
      for (const std::string& word : option.choices) list += (list.empty() ? "" : " | ") + word;
      CHECK(option.help.rfind(list, 0) == 0);
    }
  }
  CHECK(find_train_option("learning_rate") == nullptr);
}

TEST_CASE("options: values are parsed strictly and errors name the flag", "[options]") {
  TrainConfig config;
  const TrainOption& steps = *find_train_option("steps");
  CHECK_THROWS_WITH(steps.set(config, "many"), "--steps many: not a whole number >= 0");
  CHECK_THROWS_WITH(steps.set(config, "-1"), "--steps -1: not a whole number >= 0");
  CHECK_THROWS_WITH(steps.set(config, "6x"), "--steps 6x: not a whole number >= 0");
  steps.set(config, "6");
  CHECK(config.steps == 6);
  const TrainOption& lr = *find_train_option("lr");
  CHECK_THROWS_WITH(lr.set(config, "fast"), "--lr fast: not a number");
  CHECK_THROWS_WITH(lr.set(config, "-0.1"), "--lr -0.1: outside the range [0, 1000]");
  lr.set(config, "0");  // in the range; validate() rejects it
  CHECK_THROWS_WITH(config.validate(1), "--lr 0: the learning rate must be > 0");
  find_train_option("no-eval")->set(config, "true");
  CHECK_FALSE(config.evaluate);
}

TEST_CASE("options: the TOML reader names the file, line and key of a bad entry", "[options]") {
  TrainConfig config;
  CHECK_THROWS_WITH(apply_config_toml(config, "steps = 6\nlearning_rate = 0.1\n", "run.toml"),
                    "--config run.toml line 2: unknown key 'learning_rate' (keys are the flag "
                    "names of `ringtrain train`, see --help)");
  CHECK_THROWS_WITH(apply_config_toml(config, "\noverlap = \"sometimes\"\n", "run.toml"),
                    "--config run.toml line 2: --overlap sometimes: choose one of on, off, "
                    "alternate");
  CHECK_THROWS_WITH(apply_config_toml(config, "steps = 6.5\n", "run.toml"),
                    "--config run.toml line 1: --steps 6.5: not a whole number >= 0");
  CHECK_THROWS_WITH(apply_config_toml(config, "[train]\nsteps = 6\n", "run.toml"),
                    Catch::Contains("line 1") && Catch::Contains("'train'"));
  CHECK_THROWS_WITH(apply_config_toml(config, "steps = = 6\n", "run.toml"),
                    Catch::StartsWith("--config run.toml line 1: "));
  apply_config_toml(config, "# a comment\nmodel = \"cnn\" # trailing\nnesterov = true\n", "x");
  CHECK(config.model == "cnn");
  CHECK(config.nesterov);
}

TEST_CASE("options: every number has a range, stated in --help and enforced before storing",
          "[options][hostile]") {
  std::size_t numeric = 0;
  for (const TrainOption& o : train_options()) {
    if (o.kind != ValueKind::kWhole && o.kind != ValueKind::kReal) continue;
    ++numeric;
    INFO(o.name);
    CHECK(o.minimum < o.maximum);
    CHECK_THAT(o.help, Catch::Contains("range ["));
  }
  CHECK(numeric >= 30);
  TrainConfig config;
  const struct {
    const char* option;
    const char* text;
    const char* message;
  } absurd[] = {
      {"blas-threads", "100000", "--blas-threads 100000: outside the range [0, 1024]"},
      {"trace-steps", "2000000000", "--trace-steps 2000000000: outside the range [0, 10000]"},
      {"epochs", "1e300", "--epochs 1e300: outside the range [0, 1000000]"},
      {"lr", "1e300", "--lr 1e300: outside the range [0, 1000]"},
      {"steps", "99999999999999999999999", "--steps 99999999999999999999999: outside the range"},
      {"seed", "-1", "--seed -1: not a whole number >= 0"},
  };
  for (const auto& a : absurd) {
    INFO(a.option);
    CHECK_THROWS_WITH(find_train_option(a.option)->set(config, a.text), Catch::Contains(a.message));
  }
  find_train_option("seed")->set(config, "18446744073709551615");  // the type's whole range
  CHECK(config.seed == UINT64_MAX);
  // A config file reaches the same check.
  CHECK_THROWS_WITH(apply_config_toml(config, "blas-threads = 100000\n", "run.toml"),
                    Catch::Contains("run.toml line 1: --blas-threads 100000: outside the range"));
}
