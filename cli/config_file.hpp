// --config FILE for a subcommand: a TOML file whose keys are the subcommand's flag names.
//
//   # run.toml
//   model = "cnn"          ->  --model cnn
//   global-batch = 256     ->  --global-batch 256
//   nesterov = true        ->  --nesterov          (false: the flag is left out)
//
// The file's flags are placed *before* the command line's, and options keep their last
// value, so a flag given on the command line overrides the file. (CLI11 2.1's own config
// reader ignores files given to a subcommand, hence this reader.) The file is parsed by
// toml++; only top-level keys with strings, numbers and booleans are accepted: this is what
// ringtrain writes into every run directory as config.toml.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace ringtrain::cli {

// argv with every `<subcommand> ... --config FILE` expanded in place. Throws UsageError
// naming the file and line for an unreadable file, a TOML syntax error, an unknown key or
// (for `train`) a value its option does not accept.
std::vector<std::string> expand_config_files(const std::vector<std::string>& args, CLI::App& app);

}  // namespace ringtrain::cli
