// Run directory: manifest and metrics files.
#include "ringtrain/framework/train/run_directory.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <sstream>

#include "ringtrain/files/error.hpp"
#include "ringtrain/files/input.hpp"
#include "ringtrain/files/output.hpp"
#include "ringtrain/framework/error.hpp"

namespace ringtrain {

RunDirectory::RunDirectory(std::filesystem::path dir, bool allow_existing) : dir_(std::move(dir)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw Error("cannot create run directory " + dir_.string() + ": " + ec.message());
  if (!allow_existing && !files::kind_at(dir_ / "manifest.json").empty())
    throw UsageError("run directory " + dir_.string() +
                     " already holds a run (manifest.json); choose another --run-dir");
  open_metrics();
}

void RunDirectory::open_metrics() {
  // An ofstream would open a FIFO by that name and wait for a reader forever.
  const std::filesystem::path path = dir_ / "metrics.jsonl";
  const std::string there = files::kind_at(path);
  if (!there.empty() && there != "a regular file")
    throw Error(path.string() + ": is " + there + ", not a regular file: refused");
  metrics_.open(path, std::ios::app);
  if (!metrics_) throw Error("cannot open " + path.string());
}

void RunDirectory::write_manifest(const nlohmann::json& manifest) const {
  write_file_atomically(dir_ / "manifest.json", manifest.dump(2) + "\n");
}

void RunDirectory::append_metrics(const nlohmann::json& record) {
  metrics_ << record.dump() << '\n';
  metrics_.flush();
}

std::vector<nlohmann::json> RunDirectory::truncate_metrics_after(std::uint64_t step) {
  metrics_.close();
  const std::filesystem::path path = dir_ / "metrics.jsonl";
  std::string kept;
  std::vector<nlohmann::json> records;
  // Read only if it is a regular file (not a FIFO, not a link planted there), of at most 1 GiB.
  std::istringstream in(files::kind_at(path).empty()
                            ? std::string()
                            : files::read_small_file(path, {.max_bytes = kMaxMetricsBytes}));
  for (std::string line; std::getline(in, line);) {
    const auto record = nlohmann::json::parse(line, nullptr, false);
    const auto at = record.is_object() ? record.find("step") : record.end();
    if (at != record.end() && at->is_number_unsigned() && at->get<std::uint64_t>() > step) continue;
    kept += line + "\n";
    if (record.is_object()) records.push_back(record);
  }
  write_file_atomically(path, kept);
  open_metrics();
  return records;
}

void refuse_unsigned_resume(const std::filesystem::path& run_dir, bool signs) {
  const std::filesystem::path manifest = run_dir / "manifest.json";
  if (signs || files::kind_at(manifest).empty()) return;
  constexpr std::size_t kMaxManifestBytes = std::size_t{64} << 20;
  std::string text;
  try {
    text = files::read_small_file(manifest, {.max_bytes = kMaxManifestBytes});
  } catch (const files::FileError& e) {
    throw UsageError(e.what());  // a FIFO or a link in its place: refused, not waited on
  }
  const auto json = nlohmann::json::parse(text, nullptr, false);
  const auto signed_run = json.is_object() ? json.find("checkpoints_signed") : json.end();
  if (signed_run != json.end() && *signed_run == true)
    throw UsageError(run_dir.string() +
                     ": the run was signed (its manifest says checkpoints_signed) and this "
                     "launch has no key: resume with the key it was signed with "
                     "(--checkpoint-key FILE or RINGTRAIN_CHECKPOINT_KEY_FILE)");
}

std::string default_run_dir(const std::string& model) {
  const std::time_t t = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&t));
  return "runs/" + std::filesystem::path(model).stem().string() + "-" + stamp;
}

}  // namespace ringtrain
