// The TOML reader of --config (options.hpp: read_config_keys, apply_config_toml): a file's
// top-level keys as the text their flags would carry, applied through the option table. An
// array of whole numbers is a comma list (mlp-hidden = [64, 64] is --mlp-hidden 64,64); a
// relative path of an option that names files is taken from the file's folder, so a config
// file means the same from wherever it is read.
#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <filesystem>

#include "ringtrain/files/escape.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/train/options.hpp"

namespace ringtrain {
namespace {

// A TOML value as flag text; throws for tables, dates and arrays of anything but whole numbers.
std::string node_text(const toml::node& node, const std::string& where, const std::string& key) {
  if (const toml::array* array = node.as_array()) {
    std::string text;
    for (const toml::node& item : *array) {
      const auto whole = item.value_exact<std::int64_t>();
      if (!whole)
        throw UsageError(fmt::format(
            "{}: value of '{}': an array holds whole numbers only ([64, 64])", where, key));
      if (!text.empty()) text += ',';
      text += std::to_string(*whole);
    }
    return text;
  }
  if (auto s = node.value_exact<std::string>()) return *s;
  if (auto i = node.value_exact<std::int64_t>()) return std::to_string(*i);
  if (auto d = node.value_exact<double>()) return fmt::format("{}", *d);
  if (auto b = node.value_exact<bool>()) return *b ? "true" : "false";
  throw UsageError(
      fmt::format("{}: value of '{}' must be a number, a \"string\", true/false or an array of "
                  "whole numbers",
                  where, key));
}

// `text` of option `key` as a --config file at `source` means it: a relative path from the
// file's folder.
std::string resolved(const std::string& key, std::string text, const std::string& source) {
  const TrainOption* option = find_train_option(key);
  if (option == nullptr || !option->names_file(text)) return text;
  const std::filesystem::path path(text);
  if (path.is_absolute()) return text;
  return (std::filesystem::path(source).parent_path() / path).lexically_normal().string();
}

}  // namespace

std::vector<ConfigKey> read_config_keys(std::string_view toml_text, const std::string& source) {
  toml::table table;
  try {
    table = toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    throw UsageError(
        fmt::format("--config {} line {}: {}", source, e.source().begin.line, e.description()));
  }
  std::vector<std::pair<std::uint32_t, ConfigKey>> keys;
  for (auto&& [key, node] : table) {
    const std::uint32_t line = key.source().begin.line;
    ConfigKey k;
    k.key = std::string(key.str());
    k.where = fmt::format("--config {} line {}", source, line);
    k.text = resolved(k.key, node_text(node, k.where, k.key), source);
    k.is_bool = node.is_boolean();
    keys.emplace_back(line, std::move(k));
  }
  std::stable_sort(keys.begin(), keys.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<ConfigKey> ordered;
  for (auto& [line, k] : keys) ordered.push_back(std::move(k));
  return ordered;
}

void apply_config_toml(TrainConfig& config, std::string_view toml_text, const std::string& source) {
  for (const ConfigKey& k : read_config_keys(toml_text, source)) {
    const TrainOption* o = find_train_option(k.key);
    if (o == nullptr)
      throw UsageError(fmt::format(
          "{}: unknown key '{}' (keys are the flag names of `ringtrain train`, see --help)",
          k.where, files::escaped(k.key)));
    try {
      o->set(config, k.text);
    } catch (const UsageError& e) {
      throw UsageError(fmt::format("{}: {}", k.where, e.what()));
    }
  }
}

}  // namespace ringtrain
