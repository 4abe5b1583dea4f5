// The cost of the contained reader (contained.hpp) on one checkpoint load, measured in the
// same run: read_file in this process vs read_file_contained, which spawns the reader
// executable (normally ringtrain itself), sends the request, and receives the verified state
// over a pipe. Both check the seal and every checksum. Pairs alternate their order; the
// ratio is the median of contained / in-process over the pairs.
//
//   bench_contained_read --reader build/ringtrain [--floats 3750000] [--repeats 21] [--cold]
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
  std::vector<double> direct_s, contained_s, ratio, direct_cpu_s, contained_cpu_s, cpu_ratio;
  for (int r = 0; r < repeats; ++r) {
    double t[2] = {}, c[2] = {};
    for (int i = 0; i < 2; ++i) {
      const bool contained = (i == 0) == (r % 2 == 0);
      if (cold) drop_cache(file);
      const double t0 = now_s(), c0 = cpu_s();
      const StateTree loaded =
          contained ? read_file_contained(file, expected) : read_file(file, expected);
      t[contained ? 1 : 0] = now_s() - t0;
      c[contained ? 1 : 0] = cpu_s() - c0;
      if (loaded.size() != tree.size()) throw std::runtime_error("wrong tree");
    }
    direct_s.push_back(t[0]);
    contained_s.push_back(t[1]);
    ratio.push_back(t[1] / t[0]);
    direct_cpu_s.push_back(c[0]);
    contained_cpu_s.push_back(c[1]);
    cpu_ratio.push_back(c[1] / std::max(c[0], 1e-6));
  }
  std::printf("contained_read  file %.1f MB  reader %s  repeats %d  reads %s\n",
              static_cast<double>(fs::file_size(file)) / 1e6, reader.c_str(), repeats,
              cold ? "cold" : "warm");
  std::printf(
      "in-process load %.2f ms   contained load %.2f ms   contained/in-process %.3f "
      "(median of pairs)   cost %+.1f %%\n",
      median(direct_s) * 1e3, median(contained_s) * 1e3, median(ratio),
      (median(ratio) - 1.0) * 100.0);
  std::printf(
      "CPU time (parent + child, getrusage): in-process %.2f ms   contained %.2f ms   "
      "contained/in-process %.3f   cost %+.1f %%\n",
      median(direct_cpu_s) * 1e3, median(contained_cpu_s) * 1e3, median(cpu_ratio),
      (median(cpu_ratio) - 1.0) * 100.0);
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
