// Checkpoint save and load bandwidth against the raw file system, measured in the same run.
//
// For each size (floats in a tree of four arrays plus a few scalars), median of --repeats
// (each repeat runs raw and checkpoint back to back, in alternating order; the ratio is the
// median of those pairs):
//   raw write   open + write the same bytes + fsync + close              (the peer for save)
//   save        write_partial + commit: HDF5 write (xxh3 on a second thread from 512 KiB),
//               fsync, rename, fsync dir (commit_s: the rename and directory fsync alone)
//   + LATEST    update_latest + prune after the save, as the trainer runs them (LATEST.tmp
//               written, fsynced, renamed, dir fsynced; prune lists the folder and finds
//               nothing to remove): the "full" ratio is raw write / (save + LATEST + prune)
//   raw read    open + read the same bytes into freshly allocated vectors (the peer for load)
//   load        read_file with the full expectation: all checks, read, xxh3 verification
// Reads are cold by default: the file's pages are dropped from the page cache first
// (fsync, then posix_fadvise DONTNEED), for the raw file and the checkpoint alike.
// XXH3_64bits speed over the same bytes in memory is printed too: it is the checksum's share.
//
// With --key FILE, saves carry the keyed MAC and loads check it (bench/README-security.md).
//
//   bench_checkpoint_io [--dir DIR] [--sizes 1000000,10000000,100000000] [--repeats 5] [--warm]
//                       [--key FILE]
#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "ringtrain/checkpoint/commit.hpp"
#include "ringtrain/checkpoint/file.hpp"
#include "ringtrain/checkpoint/key.hpp"

namespace fs = std::filesystem;
using namespace ringtrain::checkpoint;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void check(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

// n floats as four arrays (50%, 30%, 15%, 5%) plus the scalars a real checkpoint holds.
StateTree make_tree(std::size_t n) {
  const std::size_t a = n / 2, b = n * 3 / 10, c = n * 3 / 20, d = n - a - b - c;
  StateTree tree;
  std::size_t k = 0;
  for (const auto& [name, count] :
       std::vector<std::pair<const char*, std::size_t>>{{"layers.0.linear/weight", a},
                                                        {"layers.2.linear/weight", b},
                                                        {"layers.4.linear/weight", c},
                                                        {"layers.6.linear/weight", d}}) {
    std::vector<float> values(count);
    for (float& v : values) v = static_cast<float>(k++ % 1000) * 1e-3f - 0.5f;
    tree.put_array(Group::kModel, name, {count}, std::move(values));
  }
  tree.put_u64(Group::kOptimizer, "step", 1000);
  tree.put_u64(Group::kSchedule, "step", 1000);
  tree.put_u64(Group::kData, "position", 128000);
  tree.put_u64(Group::kRng, "counter", 7);
  tree.put_u64(Group::kProgress, "global_step", 1000);
  return tree;
}

std::vector<std::span<const float>> arrays_of(const StateTree& tree) {
  std::vector<std::span<const float>> arrays;
  for (const Entry& e : tree.entries())
    if (const auto* array = std::get_if<FloatArray>(&e.value)) arrays.emplace_back(array->values);
  return arrays;
}

void write_all(int fd, const void* data, std::size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    check(n > 0, "write failed");
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

void read_all(int fd, void* data, std::size_t bytes) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::read(fd, p, bytes);
    check(n > 0, "read failed");
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

// The peer of save: the same bytes, written and fsynced.
void raw_write(const fs::path& file, const StateTree& tree) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  check(fd >= 0, "open failed");
  for (auto array : arrays_of(tree)) write_all(fd, array.data(), array.size_bytes());
  check(::fsync(fd) == 0, "fsync failed");
  check(::close(fd) == 0, "close failed");
}

// The peer of load: the same bytes, read into vectors allocated for them (as read_file does).
std::size_t raw_read(const fs::path& file, const StateTree& tree) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  check(fd >= 0, "open failed");
  std::size_t total = 0;
  for (auto array : arrays_of(tree)) {
    std::vector<float> values(array.size());
    read_all(fd, values.data(), array.size_bytes());
    total += values.size();
  }
  ::close(fd);
  return total;
}

// "/proc/loadavg" first three fields: other work on the machine skews every figure.
std::string load_average() {
  std::FILE* f = std::fopen("/proc/loadavg", "r");
  if (f == nullptr) return "?";
  char text[64] = {};
  const bool ok = std::fgets(text, sizeof text, f) != nullptr;
  std::fclose(f);
  std::string s = ok ? text : "?";
  for (int fields = 0, i = 0; i < static_cast<int>(s.size()); ++i)
    if (s[i] == ' ' && ++fields == 3) return s.substr(0, i);
  return s;
}

// Drops the file's pages from the page cache so the next read comes from the device.
void drop_cache(const fs::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  check(fd >= 0, "open failed");
  ::fsync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"checkpoint save/load bandwidth vs raw write+fsync / read"};
  std::string dir_text = (fs::temp_directory_path() / "ringtrain-bench-checkpoint").string();
  std::vector<std::size_t> sizes = {1'000'000, 10'000'000, 100'000'000};
  int repeats = 5;
  bool warm = false;
  app.add_option("--dir", dir_text, "scratch directory (created, files removed afterwards)");
  app.add_option("--sizes", sizes, "floats per checkpoint")->delimiter(',');
  app.add_option("--repeats", repeats, "repeats per measurement (median reported)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--warm", warm, "read with the file in the page cache (default: cold)");
  std::string key_file;
  app.add_option("--key", key_file, "MAC key file: sign every save and check it on load");
  CLI11_PARSE(app, argc, argv);
  const std::optional<MacKey> key_value =
      key_file.empty() ? std::nullopt : std::optional<MacKey>(MacKey::load(key_file));
  const MacKey* key = key_value ? &*key_value : nullptr;

  const fs::path dir = dir_text;
  fs::create_directories(dir);
  char date[32];
  const std::time_t t = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M", std::localtime(&t));
  std::printf("checkpoint_io  %s  HDF5 %s  xxHash %u  dir %s  repeats %d  reads %s\n", date,
              hdf5_version(), XXH_versionNumber(), dir.c_str(), repeats,
              warm ? "warm (page cache)" : "cold (pages dropped with posix_fadvise)");
  std::printf("load average at start: %s  key: %s\n", load_average().c_str(),
              key != nullptr ? "yes (keyed BLAKE2b MAC on save and load)" : "no");
  std::printf("%11s %8s | %9s %9s %9s %9s %6s %9s %6s | %9s %9s %9s %6s | %9s %8s\n", "floats",
              "MB", "raw_wr_s", "save_s", "commit_s", "save_GB/s", "ratio", "latest_s", "full",
              "raw_rd_s", "load_s", "load_GB/s", "ratio", "xxh3_GB/s", "file_MB");

  for (const std::size_t n : sizes) {
    const StateTree tree = make_tree(n);
    const Expected expected = Expected::of(tree);
    const double bytes = static_cast<double>(tree.payload_bytes());
    const fs::path raw_file = dir / "raw.bin";
    std::vector<double> raw_write_s, save_s, commit_s, latest_s, raw_read_s, load_s, hash_s;
    double file_bytes = 0;
    for (int r = 0; r < repeats; ++r) {
      // Which of the pair goes first alternates, so that whatever the second one inherits
      // (page-cache reclaim, writeback of the first) is shared out evenly.
      const bool raw_first = r % 2 == 0;
      const auto time_raw_write = [&] {
        const double t0 = now_s();
        raw_write(raw_file, tree);
        raw_write_s.push_back(now_s() - t0);
      };
      const fs::path final_path = dir / checkpoint_name(1000 + static_cast<std::uint64_t>(r));
      const auto time_save = [&] {
        Header header;
        header.step = 1000 + static_cast<std::uint64_t>(r);
        const double t0 = now_s();
        const fs::path partial = write_partial(dir, header.step, header, tree, key);
        const double t1 = now_s();
        check(commit(dir, partial) == final_path, "commit path");
        const double t2 = now_s();
        update_latest(dir, final_path.filename());
        prune(dir, 1);  // the previous repeat's checkpoint is gone already: nothing to remove
        const double t3 = now_s();
        save_s.push_back(t2 - t0);
        commit_s.push_back(t2 - t1);
        latest_s.push_back(t3 - t2);
      };
      const auto time_raw_read = [&] {
        if (!warm) drop_cache(raw_file);
        const double t0 = now_s();
        check(raw_read(raw_file, tree) == n, "raw read size");
        raw_read_s.push_back(now_s() - t0);
      };
      const auto time_load = [&] {
        if (!warm) drop_cache(final_path);
        const double t0 = now_s();
        const StateTree loaded = read_file(final_path, expected, nullptr, key);
        load_s.push_back(now_s() - t0);
        check(loaded.size() == tree.size(), "load size");
      };
      if (raw_first) {
        time_raw_write(), time_save(), time_raw_read(), time_load();
      } else {
        time_save(), time_raw_write(), time_load(), time_raw_read();
      }
      file_bytes = static_cast<double>(fs::file_size(final_path));

      const double t0 = now_s();
      std::uint64_t sink = 0;
      for (auto array : arrays_of(tree)) sink ^= XXH3_64bits(array.data(), array.size_bytes());
      hash_s.push_back(now_s() - t0);
      check(sink != 1, "hash");  // keeps the hash from being optimised away

      fs::remove(final_path);
      fs::remove(raw_file);
    }
    fs::remove(dir / kLatestName);
    const double ws = median(raw_write_s), ss = median(save_s), rs = median(raw_read_s),
                 ls = median(load_s), hs = median(hash_s);
    // Ratios are paired: raw and checkpoint of the same repeat ran back to back, so a change
    // in the machine's load between repeats cancels out; the median of the pairs is printed.
    std::vector<double> save_ratio, full_ratio, load_ratio;
    for (int r = 0; r < repeats; ++r) {
      save_ratio.push_back(raw_write_s[r] / save_s[r]);
      full_ratio.push_back(raw_write_s[r] / (save_s[r] + latest_s[r]));
      load_ratio.push_back(raw_read_s[r] / load_s[r]);
    }
    std::printf(
        "%11zu %8.1f | %9.4f %9.4f %9.4f %9.2f %6.2f %9.4f %6.2f | %9.4f %9.4f %9.2f %6.2f | %9.1f "
        "%8.1f\n",
        n, bytes / 1e6, ws, ss, median(commit_s), bytes / ss / 1e9, median(save_ratio),
        median(latest_s), median(full_ratio), rs, ls, bytes / ls / 1e9, median(load_ratio),
        bytes / hs / 1e9, file_bytes / 1e6);
    std::fflush(stdout);
  }
  std::printf("load average at end: %s\n", load_average().c_str());
  std::printf(
      "times: medians; ratio: median over repeats of raw time / checkpoint time (= checkpoint "
      "bandwidth / raw bandwidth); target for save >= 0.70\n");
  return 0;
}
