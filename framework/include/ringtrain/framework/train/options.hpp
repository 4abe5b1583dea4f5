// The options of `ringtrain train`, each declared once: one row per flag gives its name,
// the TrainConfig field it fills, its help, its check, and whether config.toml keeps it.
//
// Everything else is derived from this table: the CLI's flags and --help (cli/), the
// --config TOML reader, the run directory's config.toml (TrainConfig::to_toml), the
// manifest's "config" (TrainConfig::to_json) and TrainConfig::validate. A new flag is one
// new row. Vocabulary:
//   name     the flag without its dashes ("global-batch"); also the TOML and manifest key
//   text     a value as a user types it ("128", "on", "0.05"); set() parses it
//   switch   a flag without a value (--nesterov, --no-eval); its text is "true" or "false"
// The hidden fault-injection flags (--test-*, TrainConfig::hooks) are not options here.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ringtrain/framework/train/config.hpp"

namespace ringtrain {

enum class ValueKind {
  kText,    // any string (paths, lists such as "1024,1024", "auto" or a number)
  kWhole,   // an integer
  kReal,    // a floating-point number
  kSwitch,  // a flag without a value: "true" or "false"
  kChoice,  // one word of `choices` (an enum of modes.hpp)
};

// Which values of an option name a file or folder: config.toml writes them absolute, and a
// relative one in a --config file is taken relative to that file's folder.
enum class PathRule {
  kNone,
  kPath,      // every non-empty value (--data, --cost-model, --checkpoint-key)
  kTomlFile,  // a value ending in ".toml" (--model: otherwise a built-in model's name)
};

struct TrainOption {
  std::string name;  // "global-batch": --global-batch, TOML key, manifest key
  ValueKind kind = ValueKind::kText;
  std::vector<std::string> choices;  // kChoice: the allowed words, in the enum's order
  std::string help;                  // for --help; kChoice's starts with the choices
  bool hidden = false;               // accepted, but not listed by --help
  bool in_config_toml = true;        // false: a rerun picks its own (--run-dir, --resume)
  // Parses `text` into the field; throws UsageError naming the flag and the text.
  std::function<void(TrainConfig&, std::string_view text)> set;
  // The field's value as the manifest records it (enums by name, floats shortest).
  std::function<nlohmann::json(const TrainConfig&)> get;
  // Throws UsageError (naming the flag, the value and a hint) if the value is out of range;
  // may look at other fields. Empty: any value that parses is valid.
  std::function<void(const TrainConfig&, int world_size)> check;
  // kWhole and kReal: every value allowed lies in [minimum, maximum] (stated in --help); set()
  // refuses others, before the value is stored: "--blas-threads 100000: outside the range
  // [0, 1024]". Every numeric option has one (the table refuses to build otherwise).
  double minimum = 0.0, maximum = 0.0;
  PathRule path = PathRule::kNone;
  // A comma list of whole numbers ("1024,1024"): config.toml writes it as a TOML array
  // ([1024, 1024]), and a --config file may give either form.
  bool list = false;

  std::string flag() const { return "--" + name; }
  // True if `text`, a value of this option, names a file or folder (PathRule).
  bool names_file(std::string_view text) const;
  // The value of a default TrainConfig as text ("128"; "" for an empty string).
  std::string default_text() const;
};

// `o` with the range [minimum, maximum]: stated in its help, and set() refuses a value outside
// it ("--blas-threads 100000: outside the range [0, 1024]") after the row's own parser, also
// one too large for the field's type. Every numeric row of the table has one.
TrainOption ranged(TrainOption o, double minimum, double maximum);

// All options, in the order --help lists them.
std::span<const TrainOption> train_options();
// The option called `name` (without dashes), or nullptr.
const TrainOption* find_train_option(std::string_view name);

// A value of the manifest's JSON as the text set() takes: "x" for a string, 0.05 for a number.
std::string json_to_text(const nlohmann::json& value);

// One key of a TOML config file: its value as the text a flag would carry (a TOML array of
// whole numbers as "64,64"; a relative path of a train option resolved against the file's
// folder), and where it is.
struct ConfigKey {
  std::string key;
  std::string text;  // bools: "true" / "false"
  bool is_bool = false;
  std::string where;  // "FILE line N" for messages
};
// The top-level keys of a TOML document, in file order; `source` is the file's name, whose
// folder relative paths are taken from. Throws UsageError naming the source and line for a
// syntax error or a value that is not a string, number, bool or array of whole numbers.
std::vector<ConfigKey> read_config_keys(std::string_view toml_text, const std::string& source);
// Applies a TOML document written by TrainConfig::to_toml (or by hand) to `config`. Throws
// UsageError naming the source, line and key for an unknown key or a bad value.
void apply_config_toml(TrainConfig& config, std::string_view toml_text, const std::string& source);

}  // namespace ringtrain
