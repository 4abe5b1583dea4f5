// Near misses on the command line: "--epoch 3" gets "did you mean --epochs?" and "trian" gets
// "did you mean train?". A name is near when its edit distance (insertions, deletions,
// substitutions, and swaps of two neighbouring letters) is at most a third of its length
// (at least 1, at most 3), or when the typed name is the start of exactly one known name.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace ringtrain::cli {

// The known name nearest to `typed`, or "" when none is near.
std::string nearest_name(const std::string& typed, const std::vector<std::string>& known);

// For a failed parse of `args` by `app`: " (did you mean --epochs?)" for each token that names
// no subcommand or visible option of the subcommand it was given to, when one is near; "".
std::string near_miss_hint(const CLI::App& app, const std::vector<std::string>& args);

}  // namespace ringtrain::cli
