// The run directory, written by rank 0 alone:
//   manifest.json    what was run (config, world, reduction, versions) and its results;
//                    rewritten atomically (temp file + rename) whenever results change
//   metrics.jsonl    one JSON object per logged step or evaluation, appended and flushed
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

namespace ringtrain {

class RunDirectory {
 public:
  // Creates the directory (and parents). Throws Error if it cannot, or if it already holds a
  // manifest.json of another run and `allow_existing` is false.
  RunDirectory(std::filesystem::path dir, bool allow_existing);

  const std::filesystem::path& path() const { return dir_; }
  void write_manifest(const nlohmann::json& manifest) const;
  void append_metrics(const nlohmann::json& record);
  // A resumed run: drop the records of steps after `step` (the killed attempt logged them,
  // the resumed one will log them again), so metrics.jsonl reads as one uninterrupted run.
  void truncate_metrics_after(std::uint64_t step);

 private:
  std::filesystem::path dir_;
  std::ofstream metrics_;
};

// Writes `text` to `path` so that a reader sees the old or the new file, never a torn one
// (through `path`.tmp and a rename; the temporary file is removed when either fails).
void write_file_atomically(const std::filesystem::path& path, const std::string& text);

}  // namespace ringtrain
