// The models by name: the built-in spec files (compiled in by models/CMakeLists.txt), their
// flags as spec edits, and spec files given by path.
#include "ringtrain/models/registry.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "builtin_specs.hpp"
#include "ringtrain/framework/error.hpp"

namespace ringtrain::models {
namespace {

// The built-in file of `name`, parsed, or nullopt for another name.
std::optional<ModelSpec> builtin_spec(const std::string& name) {
  for (const auto& [builtin, text] : kBuiltinSpecs)
    if (builtin == name) return parse_model_spec(text, "model " + name);
  return std::nullopt;
}

}  // namespace

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all;
    for (const auto& [name, text] : kBuiltinSpecs) all.emplace_back(name);
    return all;
  }();
  return names;
}

bool is_spec_file(const std::string& model) {
  return model.size() > 5 && model.ends_with(".toml");
}

ModelSpec model_spec(const std::string& model, const ModelOptions& options) {
  if (is_spec_file(model)) {
    if (options.dropout > 0.0f)
      throw UsageError(
          fmt::format("--dropout {} with --model {}: a spec file is taken as "
                      "written; add a dropout layer to it instead",
                      options.dropout, model));
    return read_model_spec(model);
  }
  std::optional<ModelSpec> spec = builtin_spec(model);
  if (!spec)
    throw UsageError(fmt::format("unknown model '{}': choose {}, or give a layer list FILE.toml",
                                 model, fmt::join(model_names(), ", ")));
  if (model == "mlp") spec = with_hidden_widths(std::move(*spec), options.mlp_hidden);
  return with_dropout(std::move(*spec), options.dropout);
}

std::unique_ptr<Sequential> make_model(const std::string& name, const ModelOptions& options) {
  return build_model(model_spec(name, options), options.input, options.classes,
                     options.conv_algorithm);
}

Shape input_shape() {
  return ModelOptions{}.input;
}

bool has_batch_norm(const std::string& name) {
  const std::optional<ModelSpec> spec = builtin_spec(name);
  return spec && std::any_of(spec->layers.begin(), spec->layers.end(),
                             [](const LayerSpec& l) { return l.type == LayerType::kBatchNorm; });
}

}  // namespace ringtrain::models
