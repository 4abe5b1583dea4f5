// From TOML text to a ModelSpec (spec.hpp): toml++ parses, this file checks every table of
// `[[layers]]` against the keys its type takes, and writes the canonical form back.
#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

#include "ringtrain/files/escape.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/models/spec.hpp"

namespace ringtrain::models {
namespace {

struct TypeRow {
  LayerType type;
  std::string_view name;
  std::vector<std::string_view> keys;  // besides `type`
};

// Which keys each type takes; a table of rows, so that a new type is one row here.
const std::array<TypeRow, 7>& type_table() {
  static const std::array<TypeRow, 7> rows = {{
      {LayerType::kLinear, "linear", {"out"}},
      {LayerType::kReLU, "relu", {}},
      {LayerType::kConv2d, "conv2d", {"out", "kernel", "stride", "padding"}},
      {LayerType::kMaxPool2d, "maxpool2d", {"kernel", "stride"}},
      {LayerType::kFlatten, "flatten", {}},
      {LayerType::kDropout, "dropout", {"p"}},
      {LayerType::kBatchNorm, "batchnorm", {}},
  }};
  return rows;
}

std::string type_list() {
  std::string names;
  for (const TypeRow& row : type_table())
    names += (names.empty() ? "" : ", ") + std::string(row.name);
  return names;
}

// Reads one layer table; `where` is "<source>: layer <i>" for messages.
class LayerReader {
 public:
  LayerReader(const toml::table& table, std::string where)
      : table_(table), where_(std::move(where)) {}

  const TypeRow& type() const {
    const toml::node* node = table_.get("type");
    if (node == nullptr)
      throw UsageError(fmt::format("{} (line {}): no `type` key (one of {})", where_, line(table_),
                                   type_list()));
    if (!node->is_string())
      throw UsageError(fmt::format("{} (line {}): key 'type' must be a string (one of {})", where_,
                                   line(*node), type_list()));
    const std::string& name = node->as_string()->get();
    for (const TypeRow& row : type_table())
      if (row.name == name) return row;
    throw UsageError(fmt::format("{} (line {}): unknown layer type '{}' (one of {})", where_,
                                 line(*node), files::escaped(name), type_list()));
  }

  // Every key must be `type` or one the type takes.
  void check_keys(const TypeRow& row) const {
    for (auto&& [key, node] : table_) {
      const std::string_view name = key.str();
      if (name == "type" || std::find(row.keys.begin(), row.keys.end(), name) != row.keys.end())
        continue;
      throw UsageError(
          fmt::format("{} ({}, line {}): unknown key '{}' ({} takes {})", where_, row.name,
                      key.source().begin.line, files::escaped(name), row.name,
                      row.keys.empty() ? std::string("no keys")
                                       : fmt::format("{}", fmt::join(row.keys, ", "))));
    }
  }

  // A whole number in [low, high]; `fallback` when absent, or an error if there is none.
  std::size_t whole(const TypeRow& row, std::string_view key, std::size_t low, std::size_t high,
                    std::optional<std::size_t> fallback = std::nullopt) const {
    const toml::node* node = table_.get(key);
    if (node == nullptr) {
      if (fallback) return *fallback;
      throw UsageError(fmt::format("{} ({}, line {}): key '{}' is missing", where_, row.name,
                                   line(table_), key));
    }
    if (!node->is_integer())
      throw UsageError(fmt::format("{} ({}, line {}): key '{}' must be a whole number", where_,
                                   row.name, line(*node), key));
    const std::int64_t value = node->as_integer()->get();
    if (value < 0 || static_cast<std::uint64_t>(value) < low ||
        static_cast<std::uint64_t>(value) > high)
      throw UsageError(fmt::format("{} ({}, line {}): key '{}' = {} is outside [{}, {}]", where_,
                                   row.name, line(*node), key, value, low, high));
    return static_cast<std::size_t>(value);
  }

  // linear's out: a width, or "classes".
  std::size_t out_or_classes(const TypeRow& row) const {
    const toml::node* node = table_.get("out");
    if (node != nullptr && node->is_string()) {
      if (node->as_string()->get() == "classes") return kOutClasses;
      throw UsageError(fmt::format(
          "{} ({}, line {}): key 'out' must be a whole number or \"classes\", not \"{}\"", where_,
          row.name, line(*node), files::escaped(node->as_string()->get())));
    }
    return whole(row, "out", 1, kMaxWidth);
  }

  // dropout's p in [0, 1): a float, or the integer 0.
  float probability(const TypeRow& row) const {
    const toml::node* node = table_.get("p");
    if (node == nullptr)
      throw UsageError(
          fmt::format("{} ({}, line {}): key 'p' is missing", where_, row.name, line(table_)));
    std::optional<double> value;
    if (node->is_floating_point()) value = node->as_floating_point()->get();
    if (node->is_integer()) value = double(node->as_integer()->get());
    if (!value)
      throw UsageError(
          fmt::format("{} ({}, line {}): key 'p' must be a number", where_, row.name, line(*node)));
    if (!(*value >= 0.0 && *value < 1.0))  // also NaN
      throw UsageError(fmt::format("{} ({}, line {}): key 'p' = {} is outside [0, 1)", where_,
                                   row.name, line(*node), *value));
    return static_cast<float>(*value);
  }

  static std::size_t line(const toml::node& node) { return node.source().begin.line; }

 private:
  const toml::table& table_;
  std::string where_;
};

LayerSpec read_layer(const toml::table& table, const std::string& where) {
  const LayerReader reader(table, where);
  const TypeRow& row = reader.type();
  reader.check_keys(row);
  LayerSpec layer;
  layer.type = row.type;
  layer.line = LayerReader::line(table);
  switch (row.type) {
    case LayerType::kLinear:
      layer.out = reader.out_or_classes(row);
      break;
    case LayerType::kConv2d:
      layer.out = reader.whole(row, "out", 1, kMaxWidth);
      layer.kernel = reader.whole(row, "kernel", 1, kMaxWindow);
      layer.stride = reader.whole(row, "stride", 1, kMaxWindow, 1);
      layer.padding = reader.whole(row, "padding", 0, kMaxWindow, 0);
      break;
    case LayerType::kMaxPool2d:
      layer.kernel = reader.whole(row, "kernel", 1, kMaxWindow);
      layer.stride = reader.whole(row, "stride", 1, kMaxWindow, layer.kernel);
      break;
    case LayerType::kDropout:
      layer.p = reader.probability(row);
      break;
    case LayerType::kReLU:
    case LayerType::kFlatten:
    case LayerType::kBatchNorm:
      break;
  }
  return layer;
}

// The `layers` array of the document, checked to be a non-empty array of tables.
const toml::array& layer_array(const toml::table& document, const std::string& source) {
  for (auto&& [key, node] : document)
    if (key.str() != "layers")
      throw UsageError(fmt::format("{} line {}: unknown key '{}' (a spec holds [[layers]] tables)",
                                   source, key.source().begin.line, files::escaped(key.str())));
  const toml::node* node = document.get("layers");
  if (node == nullptr)
    throw UsageError(source + ": no layers (write one [[layers]] table per layer)");
  const toml::array* array = node->as_array();
  if (array != nullptr && array->empty()) throw UsageError(source + ": the layer list is empty");
  if (array == nullptr || !array->is_array_of_tables())
    throw UsageError(fmt::format("{} line {}: `layers` must be [[layers]] tables", source,
                                 node->source().begin.line));
  if (array->size() > kMaxLayers)
    throw UsageError(fmt::format("{}: {} layers, at most {}", source, array->size(), kMaxLayers));
  return *array;
}

}  // namespace

std::string_view type_name(LayerType type) {
  for (const TypeRow& row : type_table())
    if (row.type == type) return row.name;
  return "?";
}

ModelSpec parse_model_spec(std::string_view toml_text, const std::string& source) {
  toml::table document;
  try {
    document = toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    throw UsageError(fmt::format("{} line {}: {}", source, e.source().begin.line,
                                 files::escaped(e.description(), 200)));
  }
  ModelSpec spec;
  spec.source = source;
  const toml::array& layers = layer_array(document, source);
  for (std::size_t i = 0; i < layers.size(); ++i)
    spec.layers.push_back(
        read_layer(*layers[i].as_table(), fmt::format("{}: layer {}", source, i)));
  return spec;
}

ModelSpec read_model_spec(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error))
    throw UsageError("--model " + path + ": no such file (a model is mlp, cnn, cnn-bn or a " +
                     "FILE.toml layer list)");
  const auto bytes = std::filesystem::file_size(path, error);
  if (error || bytes > kMaxSpecFileBytes)
    throw UsageError(fmt::format("--model {}: {} bytes, a layer list holds at most {}", path,
                                 error ? 0 : bytes, kMaxSpecFileBytes));
  std::ifstream in(path, std::ios::binary);
  std::string text;
  if (in) text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (!in && !in.eof()) throw UsageError("--model " + path + ": cannot read the file");
  if (text.size() > kMaxSpecFileBytes)  // grew after the size check
    throw UsageError(fmt::format("--model {}: more than {} bytes", path, kMaxSpecFileBytes));
  return parse_model_spec(text, path);
}

std::string to_toml(const ModelSpec& spec) {
  std::string text;
  for (const LayerSpec& l : spec.layers) {
    text += fmt::format("[[layers]]\ntype = \"{}\"\n", type_name(l.type));
    switch (l.type) {
      case LayerType::kLinear:
        text += l.out == kOutClasses ? "out = \"classes\"\n" : fmt::format("out = {}\n", l.out);
        break;
      case LayerType::kConv2d:
        text += fmt::format("out = {}\nkernel = {}\nstride = {}\npadding = {}\n", l.out, l.kernel,
                            l.stride, l.padding);
        break;
      case LayerType::kMaxPool2d:
        text += fmt::format("kernel = {}\nstride = {}\n", l.kernel, l.stride);
        break;
      case LayerType::kDropout:
        // the shortest decimal form that reads back as the same float
        text += fmt::format("p = {}\n", l.p);
        break;
      default:
        break;
    }
  }
  return text;
}

}  // namespace ringtrain::models
