// The TOML reader of --config (options.hpp: read_config_keys, apply_config_toml): a file's
// top-level keys as the text their flags would carry, applied through the option table.
#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>

#include "ringtrain/files/escape.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/train/options.hpp"

namespace ringtrain {
namespace {

// A TOML value as flag text; throws for tables, arrays and dates.
std::string node_text(const toml::node& node, const std::string& where, const std::string& key) {
  if (auto s = node.value_exact<std::string>()) return *s;
  if (auto i = node.value_exact<std::int64_t>()) return std::to_string(*i);
  if (auto d = node.value_exact<double>()) return fmt::format("{}", *d);
  if (auto b = node.value_exact<bool>()) return *b ? "true" : "false";
  throw UsageError(
      fmt::format("{}: value of '{}' must be a number, a \"string\" or true/false", where, key));
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
    k.text = node_text(node, k.where, k.key);
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
