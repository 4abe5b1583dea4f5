// --help people can read: the usage line names the program and its subcommand ("Usage:
// ringtrain train [OPTIONS]"), each option's text is wrapped to the terminal's width (COLUMNS,
// else the terminal's, else 100 columns) under its own column, and train's options are
// grouped by topic (train_topic: data, model, optimization, parallelism, performance, outputs,
// checkpoints and failures).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <string_view>

namespace ringtrain::cli {

// The formatter every subcommand inherits (set on the top app before adding subcommands).
std::shared_ptr<CLI::Formatter> make_help_formatter();

// The --help heading of train's option `name` (without "--"); "Other" for a name the topic
// table does not know (a test keeps that group empty).
std::string train_topic(std::string_view name);

}  // namespace ringtrain::cli
