// The builders of the option table's rows, shared by the two files that hold the rows:
// options.cpp (data, model, optimizer, parallelism, buckets) and run_options.cpp (the run,
// checkpoints, safety nets, the split of the global batch).
//
// option(name, &TrainConfig::field, help, check) makes one row; the field's type decides how
// its text is parsed and how the manifest shows it (strings as they are, integers strictly,
// floats by their shortest decimal form, enums by their word from modes.hpp).
#pragma once

#include <fmt/format.h>

#include <charconv>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "ringtrain/files/escape.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/train/options.hpp"

namespace ringtrain::option_rows {

using Check = std::function<void(const TrainConfig&, int world_size)>;

inline void require(bool ok, const std::string& message) {
  if (!ok) throw UsageError(message);
}

// A float as the double with the same shortest decimal form: 0.9f -> 0.9, not 0.8999999761.
inline double shortest(float value) {
  return std::stod(fmt::format("{}", value));
}

// The whole text as a number of type T: "12" yes, "12x", "", "many" and "-1" (unsigned) no.
template <typename T>
T parse_number(std::string_view text, const std::string& flag) {
  T value{};
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || stop != end) {
    const char* what = std::is_integral_v<T> ? (std::is_signed_v<T> ? "not a whole number"
                                                                    : "not a whole number >= 0")
                                             : "not a number";
    throw UsageError(fmt::format("{} {}: {}", flag, files::escaped(text), what));
  }
  return value;
}

inline bool parse_switch(std::string_view text, const std::string& flag) {
  if (text == "true") return true;
  if (text == "false") return false;
  throw UsageError(fmt::format("{} {}: a switch is true or false", flag, files::escaped(text)));
}

// One row: the field's type picks the kind, the parser and the manifest's form.
template <typename T>
TrainOption option(std::string name, T TrainConfig::*field, std::string help, Check check = {}) {
  TrainOption o;
  o.name = std::move(name);
  o.help = std::move(help);
  o.check = std::move(check);
  const std::string flag = "--" + o.name;
  if constexpr (std::is_same_v<T, std::string>) {
    o.kind = ValueKind::kText;
    o.set = [field](TrainConfig& c, std::string_view text) { c.*field = std::string(text); };
    o.get = [field](const TrainConfig& c) { return nlohmann::json(c.*field); };
  } else if constexpr (std::is_same_v<T, bool>) {
    o.kind = ValueKind::kSwitch;
    o.set = [field, flag](TrainConfig& c, std::string_view text) {
      c.*field = parse_switch(text, flag);
    };
    o.get = [field](const TrainConfig& c) { return nlohmann::json(c.*field); };
  } else if constexpr (std::is_enum_v<T>) {
    o.kind = ValueKind::kChoice;
    for (const Choice<T>& choice : choices<T>()) o.choices.emplace_back(choice.name);
    o.help = choice_list<T>() + (o.help.empty() ? "" : ": " + o.help);
    o.set = [field, flag](TrainConfig& c, std::string_view text) {
      c.*field = parse_choice<T>(text, flag);
    };
    o.get = [field](const TrainConfig& c) { return nlohmann::json(name_of(c.*field)); };
  } else {
    static_assert(std::is_arithmetic_v<T>, "an option's field is a string, bool, enum or number");
    o.kind = std::is_integral_v<T> ? ValueKind::kWhole : ValueKind::kReal;
    o.set = [field, flag](TrainConfig& c, std::string_view text) {
      c.*field = parse_number<T>(text, flag);
    };
    o.get = [field](const TrainConfig& c) {
      if constexpr (std::is_same_v<T, float>) return nlohmann::json(shortest(c.*field));
      return nlohmann::json(c.*field);
    };
  }
  return o;
}

// A switch that clears `field` when given: --no-eval sets evaluate = false.
inline TrainOption negated_switch(std::string name, bool TrainConfig::*field, std::string help) {
  TrainOption o = option(std::move(name), field, std::move(help));
  const std::string flag = o.flag();
  o.set = [field, flag](TrainConfig& c, std::string_view text) {
    c.*field = !parse_switch(text, flag);
  };
  o.get = [field](const TrainConfig& c) { return nlohmann::json(!(c.*field)); };
  return o;
}

// An option whose values name files (PathRule).
inline TrainOption path(TrainOption o, PathRule rule = PathRule::kPath) {
  o.path = rule;
  return o;
}

// An option that takes a comma list of whole numbers.
inline TrainOption list(TrainOption o) {
  o.list = true;
  return o;
}

inline TrainOption not_in_config_toml(TrainOption o) {
  o.in_config_toml = false;
  return o;
}

// Another name of an option that config.toml writes under its own name (the manifest's
// config shows both, with the same value, for scripts that read the old name).
inline TrainOption alias(TrainOption o) {
  return not_in_config_toml(std::move(o));
}

// The parts of the table in run_options.cpp.
std::vector<TrainOption> run_options();
std::vector<TrainOption> checkpoint_options();
std::vector<TrainOption> safety_options();
std::vector<TrainOption> split_options();

}  // namespace ringtrain::option_rows
