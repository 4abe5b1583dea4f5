// A small file replaced whole: a reader sees the old or the new file, never a torn one
// (manifest.json, config.toml, metrics.jsonl when a resume truncates it, trace.json).
// Checkpoints commit through checkpoint/commit.hpp instead.
#pragma once

#include <filesystem>
#include <string>

namespace ringtrain {

// Writes `text` to `path`: files::write_file_atomically (a destination that is not a regular
// file is refused, the temporary `path`.tmp is created new beside it, fsynced, renamed;
// removed if anything fails).
void write_file_atomically(const std::filesystem::path& path, const std::string& text);

}  // namespace ringtrain
