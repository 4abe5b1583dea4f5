// `ringtrain model NAME|FILE.toml [--input C,H,W] [--classes K]`: the model as the banner of
// `ringtrain train` shows it (each layer's output shape and parameters), without data or
// training. Checks the layer list as a run would: a defect is one line and exit 2.
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "commands.hpp"
#include "ringtrain/framework/data/user_data.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/size_list.hpp"
#include "ringtrain/models/registry.hpp"

namespace ringtrain::cli {

namespace {

struct ModelArgs {
  std::string model;
  std::string input = "1,28,28";
  std::int64_t classes = 10;  // signed: "-1" must be refused, not wrapped around
};

int print_model(const ModelArgs& args, bool leader) {
  const Shape input = parse_size_list(args.input, "--input");
  for (std::size_t d : input)
    if (d == 0) throw UsageError("--input " + args.input + ": sizes must be > 0");
  if (args.classes < 1 || args.classes > std::int64_t(data::kMaxClasses))
    throw UsageError(
        fmt::format("--classes {}: outside the range [1, {}]", args.classes, data::kMaxClasses));
  const auto classes = static_cast<std::size_t>(args.classes);
  const std::unique_ptr<Sequential> model =
      models::build_model(models::model_spec(args.model), input, classes);
  model->plan(input, 1);
  if (leader)
    std::printf("model %s: samples %s, %zu classes\n%s", args.model.c_str(),
                to_string(input).c_str(), classes, model->summary().c_str());
  return 0;
}

}  // namespace

void add_model(CLI::App& app, Runner& run, bool leader) {
  auto args = std::make_shared<ModelArgs>();
  CLI::App* sub = app.add_subcommand(
      "model", "print a model's layers, output shapes and parameters without training");
  sub->add_option("model", args->model, "mlp | cnn | cnn-bn | FILE.toml (a [[layers]] list)")
      ->required();
  sub->add_option("--input", args->input, "per-sample shape, e.g. C,H,W or FEATURES")
      ->capture_default_str();
  sub->add_option("--classes", args->classes,
                  fmt::format("number of classes (the last layer's width; range [1, {}])",
                              data::kMaxClasses))
      ->capture_default_str();
  sub->callback(
      [&run, args, leader] { run = [args, leader] { return print_model(*args, leader); }; });
}

}  // namespace ringtrain::cli
