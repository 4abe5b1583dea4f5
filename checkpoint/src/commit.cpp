// The atomic commit protocol and retention (commit.hpp lists the steps and, at each
// function, the crash it survives). Durability comes from fsync of the file before its
// rename and of the directory after it; atomicity from rename(2) within one directory.
#include "ringtrain/checkpoint/commit.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <set>
#include <tuple>
#include <utility>

#include "posix_io.hpp"
#include "ringtrain/checkpoint/contained.hpp"
#include "ringtrain/checkpoint/error.hpp"
#include "ringtrain/files/error.hpp"
#include "ringtrain/files/escape.hpp"
#include "ringtrain/files/input.hpp"
#include "ringtrain/files/output.hpp"
#include "seal.hpp"

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

// files::FileError becomes CheckpointError naming the same path.
template <typename Operation>
auto as_checkpoint_error(Operation&& operation) {
  try {
    return operation();
  } catch (const files::FileError& error) {
    throw CheckpointError(error.path(), error.reason());
  }
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

// A file as the kernel knows it: the same identity means the same bytes as when it was
// verified (a rewrite changes the size or the modification time, a replacement the inode).
using Identity = std::tuple<dev_t, ino_t, off_t, std::int64_t, std::int64_t>;

std::optional<Identity> identity_of(const fs::path& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return std::nullopt;
  return Identity{info.st_dev, info.st_ino, info.st_size, info.st_mtim.tv_sec,
                  info.st_mtim.tv_nsec};
}

// The checkpoints this process committed or verified, so that retention reads each file
// once per process, not at every save. Rank 0's training thread and writer thread both
// prune (never at once), hence the mutex.
class VerifiedFiles {
 public:
  void add(const fs::path& path) {
    const auto id = identity_of(path);
    const std::lock_guard lock(mutex_);
    if (id) known_.insert(*id);
  }
  bool contains(const fs::path& path) const {
    const auto id = identity_of(path);
    const std::lock_guard lock(mutex_);
    return id && known_.count(*id) > 0;
  }

 private:
  mutable std::mutex mutex_;
  std::set<Identity> known_;
};

VerifiedFiles& verified_files() {
  static VerifiedFiles files;
  return files;
}

// Throws CheckpointError unless `path` verifies: a sealed file by its whole seal with plain
// reads (length, content digest, the MAC with `key`), a version-1 file by verify_file
// (contained). Remembered once it did.
void verify_for_retention(const fs::path& path, const MacKey* key) {
  if (verified_files().contains(path)) return;
  const detail::ReadOnlyFile raw(path);
  if (detail::starts_with_seal(raw, path))
    detail::check_seal(raw, path, key);
  else
    verify_file_contained(path, key);
  verified_files().add(path);
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
  // A directory, FIFO or device by the final name is refused, not replaced.
  as_checkpoint_error([&] { files::rename_into_place(partial, final_path, /*sync=*/false); });
  reach(kAfterRename);
  detail::fsync_directory(dir);  // the rename itself is now durable
  reach(kAfterDirectorySync);
  verified_files().add(final_path);  // written and sealed by this process
  return final_path;
}

void update_latest(const fs::path& dir, const fs::path& final_name) {
  const fs::path name = final_name.filename();
  if (!parse_checkpoint_name(name))
    throw CheckpointError(dir / kLatestName,
                          "refusing to point at '" + name.string() + "': not a checkpoint name");
  if (!guarded(dir / name, "cannot check", [&] { return fs::is_regular_file(dir / name); }))
    throw CheckpointError(dir / name, "refusing to point LATEST at a missing checkpoint");
  // LATEST.tmp (created new, O_EXCL) is written and fsynced before the rename makes it
  // visible: old or new LATEST, never torn. A LATEST that is not a regular file (a
  // directory, a FIFO) is refused before anything is written.
  as_checkpoint_error(
      [&] { files::write_file_atomically(dir / kLatestName, name.string() + "\n"); });
  reach(kAfterLatest);
}

std::optional<fs::path> read_latest(const fs::path& dir) {
  const fs::path latest = dir / kLatestName;
  if (as_checkpoint_error([&] { return files::kind_at(latest); }).empty()) return std::nullopt;
  // Opened without blocking and checked to be a small regular file before it is read: a
  // FIFO by that name must not hang the resume.
  std::string text = as_checkpoint_error([&] {
    return files::read_small_file(latest, {.max_bytes = kMaxLatestBytes, .follow_symlinks = false});
  });
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' '))
    text.pop_back();
  if (!parse_checkpoint_name(text))
    throw CheckpointError(latest,
                          "does not hold a checkpoint name ('" + files::escaped(text) + "')");
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

std::vector<fs::path> prune(const fs::path& dir, std::size_t keep,
                            std::vector<std::string>* unverified, const MacKey* key) {
  if (keep == 0) throw CheckpointError(dir, "prune: keep must be at least 1");
  const std::optional<fs::path> latest = read_latest(dir);
  std::vector<fs::path> doomed;
  // Only checkpoints that verify take one of the `keep` places (and only they are removed):
  // files named like checkpoints that do not verify are garbage someone left, reported and
  // left alone, never counted against the real ones.
  std::size_t kept = 0;
  for (const fs::path& path : list_checkpoints(dir)) {
    try {
      verify_for_retention(path, key);
    } catch (const CheckpointError& error) {
      if (unverified != nullptr) unverified->push_back(rejection(path, error));
      continue;
    }
    if (kept++ < keep) continue;
    if (!latest || path.filename() != latest->filename()) doomed.push_back(path);
  }
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
                                        std::vector<std::string>* rejected, const MacKey* key,
                                        const CandidateChecks& checks) {
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
      if (checks.header) checks.header(path, read_header_contained(path, key));
      Header header;
      StateTree tree = read_file_contained(path, expected, &header, key);
      if (header.step != parse_checkpoint_name(path.filename()))
        throw CheckpointError(
            path, "header step " + std::to_string(header.step) + " does not match the file name");
      Loaded loaded{path, std::move(header), std::move(tree)};
      if (checks.loaded) checks.loaded(loaded);
      return loaded;
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
