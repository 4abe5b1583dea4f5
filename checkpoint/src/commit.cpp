// The atomic commit protocol and retention (commit.hpp lists the steps and, at each
// function, the crash it survives). Durability comes from fsync of the file before its
// rename and of the directory after it; atomicity from rename(2) within one directory.
#include "ringtrain/checkpoint/commit.hpp"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "posix_io.hpp"
#include "ringtrain/checkpoint/contained.hpp"
#include "ringtrain/checkpoint/error.hpp"

namespace ringtrain::checkpoint {
namespace fs = std::filesystem;

namespace {

constexpr std::string_view kPartialSuffix = ".partial";
constexpr const char* kLatestTmpName = "LATEST.tmp";
constexpr std::size_t kMaxLatestBytes = 256;

// The one process-wide test hook (commit.hpp: set_crash_hook). Empty in production.
std::function<void(int)>& crash_hook() {
  static std::function<void(int)> hook;
  return hook;
}

void reach(CrashPhase phase) {
  if (crash_hook()) crash_hook()(phase);
}

// std::filesystem errors become CheckpointError naming the path.
template <typename Operation>
auto guarded(const fs::path& path, const char* what, Operation&& operation) {
  try {
    return operation();
  } catch (const fs::filesystem_error& error) {
    throw CheckpointError(path, std::string(what) + ": " + error.code().message());
  }
}

void rename_or_throw(const fs::path& from, const fs::path& to) {
  guarded(from, ("rename to " + to.filename().string() + " failed").c_str(),
          [&] { fs::rename(from, to); });
}

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// "step-00000200.h5.partial" -> true (the partial of a checkpoint name).
bool is_partial_name(const std::string& name) {
  return ends_with(name, kPartialSuffix) &&
         parse_checkpoint_name(name.substr(0, name.size() - kPartialSuffix.size())).has_value();
}

// The failure as "<file name>: <reason>" for the rejected list.
std::string rejection(const fs::path& path, const CheckpointError& error) {
  std::string text = error.what();
  const std::string prefix = path.string() + ": ";
  if (text.compare(0, prefix.size(), prefix) == 0) text.erase(0, prefix.size());
  return path.filename().string() + ": " + text;
}

}  // namespace

fs::path checkpoint_name(std::uint64_t step) {
  char name[40];
  std::snprintf(name, sizeof name, "step-%08llu.h5", static_cast<unsigned long long>(step));
  return name;
}

std::optional<std::uint64_t> parse_checkpoint_name(const fs::path& file_name) {
  const std::string name = file_name.string();
  constexpr std::string_view kPrefix = "step-", kSuffix = ".h5";
  if (name.size() < kPrefix.size() + 8 + kSuffix.size() || name.compare(0, 5, kPrefix) != 0 ||
      !ends_with(name, kSuffix))
    return std::nullopt;
  const std::string digits = name.substr(5, name.size() - 5 - kSuffix.size());
  if (digits.size() > 20 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  std::uint64_t step = 0;
  for (char c : digits) {
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (step > (UINT64_MAX - digit) / 10) return std::nullopt;
    step = step * 10 + digit;
  }
  // Only the canonical spelling: "step-000000200.h5" is not a name we write.
  if (checkpoint_name(step) != file_name) return std::nullopt;
  return step;
}

fs::path write_partial(const fs::path& dir, std::uint64_t step, const Header& header,
                       const StateTree& tree, const MacKey* key) {
  const fs::path partial = dir / (checkpoint_name(step).string() + std::string(kPartialSuffix));
  if (header.step != step)
    throw CheckpointError(partial, "header step " + std::to_string(header.step) +
                                       " differs from the checkpoint step " + std::to_string(step));
  write_file(partial, header, tree, key);  // closes, seals and fsyncs
  reach(kAfterPartialWritten);
  return partial;
}

void remove_partial(const fs::path& dir, std::uint64_t step) {
  const fs::path partial = dir / (checkpoint_name(step).string() + std::string(kPartialSuffix));
  guarded(partial, "cannot remove", [&] { fs::remove(partial); });
}

fs::path commit(const fs::path& dir, const fs::path& partial) {
  const std::string name = partial.filename().string();
  if (!is_partial_name(name))
    throw CheckpointError(partial, "not a partial checkpoint name (step-XXXXXXXX.h5.partial)");
  const fs::path final_path = dir / name.substr(0, name.size() - kPartialSuffix.size());
  // The file was fsynced by write_partial, so whichever name survives a crash, it is whole.
  rename_or_throw(partial, final_path);
  reach(kAfterRename);
  detail::fsync_directory(dir);  // the rename itself is now durable
  reach(kAfterDirectorySync);
  return final_path;
}

void update_latest(const fs::path& dir, const fs::path& final_name) {
  const fs::path name = final_name.filename();
  if (!parse_checkpoint_name(name))
    throw CheckpointError(dir / kLatestName,
                          "refusing to point at '" + name.string() + "': not a checkpoint name");
  if (!guarded(dir / name, "cannot check", [&] { return fs::is_regular_file(dir / name); }))
    throw CheckpointError(dir / name, "refusing to point LATEST at a missing checkpoint");
  const fs::path tmp = dir / kLatestTmpName;
  detail::write_synced(tmp, name.string() + "\n");  // complete and durable before it is visible
  rename_or_throw(tmp, dir / kLatestName);          // atomic: old or new LATEST, never torn
  detail::fsync_directory(dir);
  reach(kAfterLatest);
}

std::optional<fs::path> read_latest(const fs::path& dir) {
  const fs::path latest = dir / kLatestName;
  if (!guarded(latest, "cannot check", [&] { return fs::exists(latest); })) return std::nullopt;
  std::string text = detail::read_small_file(latest, kMaxLatestBytes);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' '))
    text.pop_back();
  if (!parse_checkpoint_name(text)) {
    std::string shown;
    for (char c : text.substr(0, 60)) shown += (c >= 32 && c < 127) ? c : '?';
    throw CheckpointError(latest, "does not hold a checkpoint name ('" + shown + "')");
  }
  return dir / text;
}

std::vector<fs::path> list_checkpoints(const fs::path& dir) {
  std::vector<std::pair<std::uint64_t, fs::path>> found;
  guarded(dir, "cannot list", [&] {
    if (!fs::is_directory(dir)) return;
    for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
      const auto step = parse_checkpoint_name(entry.path().filename());
      if (step && entry.is_regular_file()) found.emplace_back(*step, entry.path());
    }
  });
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<fs::path> paths;
  for (auto& [step, path] : found) paths.push_back(std::move(path));
  return paths;
}

std::vector<fs::path> prune(const fs::path& dir, std::size_t keep) {
  if (keep == 0) throw CheckpointError(dir, "prune: keep must be at least 1");
  const std::optional<fs::path> latest = read_latest(dir);
  std::vector<fs::path> doomed;
  const std::vector<fs::path> committed = list_checkpoints(dir);
  for (std::size_t i = keep; i < committed.size(); ++i)
    if (!latest || committed[i].filename() != latest->filename()) doomed.push_back(committed[i]);
  guarded(dir, "cannot list", [&] {
    for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
      const std::string name = entry.path().filename().string();
      if (entry.is_regular_file() && (is_partial_name(name) || name == kLatestTmpName))
        doomed.push_back(entry.path());
    }
  });
  for (const fs::path& path : doomed) {
    guarded(path, "cannot remove", [&] { fs::remove(path); });
    reach(kDuringPrune);
  }
  return doomed;
}

std::optional<Loaded> load_newest_valid(const fs::path& dir, const Expected& expected,
                                        std::vector<std::string>* rejected, const MacKey* key) {
  const auto reject = [&](std::string text) {
    if (rejected != nullptr) rejected->push_back(std::move(text));
  };
  // LATEST only speeds up humans and tools; the resume goes by the files themselves. A crash
  // after commit() and before update_latest() leaves a whole, fsynced, newer checkpoint that
  // LATEST does not name yet: it is the newest that verifies, so it is the one to take.
  // A LATEST that cannot be read or names a missing file is still reported.
  try {
    if (const auto latest = read_latest(dir)) {
      std::error_code error;
      if (!fs::is_regular_file(*latest, error))
        reject(std::string(kLatestName) + ": names " + latest->filename().string() +
               ", which does not exist");
    }
  } catch (const CheckpointError& error) {
    reject(std::string(kLatestName) + ": " + error.reason());
  }
  for (const fs::path& path : list_checkpoints(dir)) {
    try {
      Header header;
      StateTree tree = read_file_contained(path, expected, &header, key);
      if (header.step != parse_checkpoint_name(path.filename()))
        throw CheckpointError(
            path, "header step " + std::to_string(header.step) + " does not match the file name");
      return Loaded{path, std::move(header), std::move(tree)};
    } catch (const CheckpointError& error) {
      reject(rejection(path, error));
    }
  }
  return std::nullopt;
}

std::optional<fs::path> newest_valid(const fs::path& dir, const Expected& expected,
                                     std::vector<std::string>* rejected, const MacKey* key) {
  auto loaded = load_newest_valid(dir, expected, rejected, key);
  if (!loaded) return std::nullopt;
  return std::move(loaded->path);
}

void set_crash_hook(std::function<void(int phase)> hook) {
  crash_hook() = std::move(hook);
}

}  // namespace ringtrain::checkpoint
