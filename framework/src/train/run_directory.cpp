// Run directory: manifest and metrics files.
#include "ringtrain/framework/train/run_directory.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ringtrain/framework/error.hpp"

namespace ringtrain {

RunDirectory::RunDirectory(std::filesystem::path dir, bool allow_existing) : dir_(std::move(dir)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw Error("cannot create run directory " + dir_.string() + ": " + ec.message());
  if (!allow_existing && std::filesystem::exists(dir_ / "manifest.json"))
    throw UsageError("run directory " + dir_.string() +
                     " already holds a run (manifest.json); choose another --run-dir");
  metrics_.open(dir_ / "metrics.jsonl", std::ios::app);
  if (!metrics_) throw Error("cannot open " + (dir_ / "metrics.jsonl").string());
}

void RunDirectory::write_manifest(const nlohmann::json& manifest) const {
  write_file_atomically(dir_ / "manifest.json", manifest.dump(2) + "\n");
}

void RunDirectory::append_metrics(const nlohmann::json& record) {
  metrics_ << record.dump() << '\n';
  metrics_.flush();
}

void RunDirectory::truncate_metrics_after(std::uint64_t step) {
  metrics_.close();
  const std::filesystem::path path = dir_ / "metrics.jsonl";
  std::string kept;
  {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      const auto record = nlohmann::json::parse(line, nullptr, false);
      if (!record.is_discarded() && record.value("step", std::uint64_t{0}) > step) continue;
      kept += line + "\n";
    }
  }
  write_file_atomically(path, kept);
  metrics_.open(path, std::ios::app);
  if (!metrics_) throw Error("cannot open " + path.string());
}

void write_file_atomically(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path temp = path.string() + ".tmp";
  {
    std::ofstream out(temp, std::ios::trunc);
    out << text;
    out.flush();
    if (!out) {
      std::error_code ignored;
      std::filesystem::remove(temp, ignored);  // nothing half-written stays behind
      throw Error("cannot write " + temp.string());
    }
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);  // atomic on POSIX: old or new, never torn
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(temp, ignored);
    throw Error("cannot rename " + temp.string() + " to " + path.string() + ": " + ec.message());
  }
}

}  // namespace ringtrain
