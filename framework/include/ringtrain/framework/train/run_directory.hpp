// The run directory, written by rank 0 alone:
//   manifest.json    what was run (config, world, reduction, versions) and its results;
//                    rewritten atomically (temp file + rename) whenever results change
//   metrics.jsonl    one JSON object per logged step or evaluation, appended and flushed
// Files found there are untrusted: a manifest.json, metrics.jsonl or a temporary that is a
// FIFO, a directory or a device is refused (files/), never opened blindly.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "ringtrain/framework/atomic_file.hpp"

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
  // Returns the records kept that are JSON objects, in order.
  std::vector<nlohmann::json> truncate_metrics_after(std::uint64_t step);

  // metrics.jsonl larger than this is refused by truncate_metrics_after.
  static constexpr std::size_t kMaxMetricsBytes = std::size_t{1} << 30;

 private:
  // Opens metrics.jsonl for appending; refuses it if it exists and is not a regular file.
  void open_metrics();
  std::filesystem::path dir_;
  std::ofstream metrics_;
};

// The run directory of a run without --run-dir: runs/<model>-<local time>, where <model> is
// the --model name or its spec file's stem (runs/net-20261207-101500 for specs/net.toml).
std::string default_run_dir(const std::string& model);

// A resume of the run in `run_dir`: throws UsageError if its manifest.json says the run signs
// its checkpoints (checkpoints_signed) and this launch has no key (`signs` false), so that a
// signed run never goes on unsigned; a manifest.json that is not a small regular file is
// refused too. No manifest: nothing to check (the checkpoints' seals say it as well).
void refuse_unsigned_resume(const std::filesystem::path& run_dir, bool signs);

}  // namespace ringtrain
