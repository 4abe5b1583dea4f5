// The cost of the contained reader (contained.hpp) on one checkpoint load, measured in the
// same run: read_file in this process vs read_file_contained, whose child parses the file
// with libhdf5 while this process checks the seal, then reads the arrays the child located.
// Both check the seal and every checksum. Each round loads three ways in a rotating order;
// ratios are medians over the rounds of (way / in-process) within a round.
//
//   bench_contained_read --reader build/ringtrain-checkpoint-reader [--floats 3750000]
//                        [--repeats 21] [--cold]
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ringtrain/checkpoint/contained.hpp"
#include "ringtrain/checkpoint/file.hpp"

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

// Three arrays like an MLP's weights and momentum, plus scalars.
StateTree make_tree(std::size_t n) {
  StateTree tree;
  const std::size_t a = n / 2, b = n / 4, c = n - a - b;
  std::size_t k = 0;
  for (const auto& [name, count] :
       std::vector<std::pair<const char*, std::size_t>>{{"layers.0.linear/weight", a},
                                                        {"layers.2.linear/weight", b},
                                                        {"layers.4.linear/weight", c}}) {
    std::vector<float> values(count);
    for (float& v : values) v = static_cast<float>(k++ % 1000) * 1e-3f - 0.5f;
    tree.put_array(Group::kModel, name, {count}, std::move(values));
  }
  tree.put_u64(Group::kOptimizer, "step", 1000);
  tree.put_u64(Group::kProgress, "global_step", 1000);
  return tree;
}

// CPU seconds (user + system) of this process and of its waited-for children so far.
double cpu_s() {
  double total = 0;
  for (int who : {RUSAGE_SELF, RUSAGE_CHILDREN}) {
    rusage usage{};
    ::getrusage(who, &usage);
    total += static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
             static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
  }
  return total;
}

void drop_cache(const fs::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("open failed");
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"contained checkpoint read vs in-process read"};
  std::string reader;
  std::size_t floats = 3'750'000;  // 15 MB
  int repeats = 21;
  bool cold = false;
  app.add_option("--reader", reader, "executable that serves the reader subcommand (ringtrain)")
      ->required();
  app.add_option("--floats", floats, "floats in the checkpoint");
  app.add_option("--repeats", repeats, "pairs measured (median reported)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--cold", cold, "drop the file's pages before each read (default: warm)");
  CLI11_PARSE(app, argc, argv);

  const fs::path file = fs::temp_directory_path() / "ringtrain-bench-contained.h5";
  const StateTree tree = make_tree(floats);
  const Expected expected = Expected::of(tree);
  Header header;
  write_file(file, header, tree);
  enable_contained_reader(reader);
  // Three ways to load, in an order that rotates each round: in-process; contained with
  // the child started at the load (cold); contained with the child started ahead
  // (prepare_contained_reader, then a pause standing for the work a run does before it
  // reads its checkpoint).
  enum Way { kInProcess, kCold, kAhead, kWays };
  std::vector<double> wall[kWays], cpu[kWays], ratio[kWays], cpu_ratio[kWays];
  for (int r = 0; r < repeats; ++r) {
    double t[kWays] = {}, c[kWays] = {};
    for (int i = 0; i < kWays; ++i) {
      const Way way = static_cast<Way>((i + r) % kWays);
      if (cold) drop_cache(file);
      if (way == kAhead) {
        prepare_contained_reader();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      const double t0 = now_s(), c0 = cpu_s();
      const StateTree loaded =
          way == kInProcess ? read_file(file, expected) : read_file_contained(file, expected);
      t[way] = now_s() - t0;
      c[way] = cpu_s() - c0;
      if (loaded.size() != tree.size()) throw std::runtime_error("wrong tree");
    }
    for (int w = 0; w < kWays; ++w) {
      wall[w].push_back(t[w]);
      cpu[w].push_back(c[w]);
      ratio[w].push_back(t[w] / t[kInProcess]);
      cpu_ratio[w].push_back(c[w] / std::max(c[kInProcess], 1e-6));
    }
  }
  std::printf("contained_read  file %.1f MB  reader %s  repeats %d  reads %s\n",
              static_cast<double>(fs::file_size(file)) / 1e6, reader.c_str(), repeats,
              cold ? "cold" : "warm");
  std::printf("in-process load %.2f ms wall, %.2f ms CPU\n", median(wall[kInProcess]) * 1e3,
              median(cpu[kInProcess]) * 1e3);
  for (Way way : {kCold, kAhead})
    std::printf(
        "contained, child started %-9s load %.2f ms wall (%.3fx in-process, cost %+.1f %%), "
        "%.2f ms CPU with the child's (%.3fx)\n",
        way == kCold ? "at load:" : "ahead:", median(wall[way]) * 1e3, median(ratio[way]),
        (median(ratio[way]) - 1.0) * 100.0, median(cpu[way]) * 1e3, median(cpu_ratio[way]));
  std::printf("load average: %s",
              [] {
                std::FILE* f = std::fopen("/proc/loadavg", "r");
                char text[64] = "?\n";
                if (f != nullptr) {
                  if (std::fgets(text, sizeof text, f) == nullptr) text[0] = '?';
                  std::fclose(f);
                }
                return std::string(text);
              }()
                  .c_str());
  fs::remove(file);
  return 0;
}
