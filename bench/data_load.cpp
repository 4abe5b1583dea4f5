// bench_data_load: what the data's digest costs at load. Loads the same --data PATH with and
// without digests (LoadOptions::digest), alternating which goes first from round to round,
// and prints the median load time of each, the median per-round ratio with / without and its
// min-max. Both load the same way otherwise (the same checks; mapped or in memory as the
// layout says), so the difference is the XXH3 pass over the bytes. Run it with the files in
// the page cache (a first load warms them) to see the digest's cost and not the disk's.
//   bench_data_load [PATH] [--rounds 9]      PATH: as --data (default: Fashion-MNIST's IDX)
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "ringtrain/framework/data/user_data.hpp"

namespace {

double load_s(const std::string& path, bool digest) {
  const auto t0 = std::chrono::steady_clock::now();
  const ringtrain::data::DataSplits d = ringtrain::data::load_data(path, {.digest = digest});
  const auto t1 = std::chrono::steady_clock::now();
  if (digest && d.info.digest.empty()) throw std::runtime_error("no digest computed");
  return std::chrono::duration<double>(t1 - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_data_load: load time with and without the data's digest"};
  std::string path;
  int rounds = 9;
  app.add_option("PATH", path, "as --data: IDX folder, HDF5 file, .npy folder");
  app.add_option("--rounds", rounds, "paired rounds")->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);
  const ringtrain::data::DataSplits first = ringtrain::data::load_data(path);  // warms the cache
  std::printf("data %s (%s), digest %s; %d rounds\n", first.info.path.c_str(),
              ringtrain::data::to_string(first.info.layout), first.info.digest.c_str(), rounds);
  std::vector<double> with, without, ratio;
  for (int r = 0; r < rounds; ++r) {
    double w = 0, wo = 0;
    if (r % 2 == 0) {
      w = load_s(path, true);
      wo = load_s(path, false);
    } else {
      wo = load_s(path, false);
      w = load_s(path, true);
    }
    with.push_back(w);
    without.push_back(wo);
    ratio.push_back(w / wo);
  }
  std::printf("load with digest    median %.4f s\n", median(with));
  std::printf("load without digest median %.4f s\n", median(without));
  std::printf("ratio with / without median %.4f (min %.4f, max %.4f); digest costs %.4f s\n",
              median(ratio), *std::min_element(ratio.begin(), ratio.end()),
              *std::max_element(ratio.begin(), ratio.end()), median(with) - median(without));
  return 0;
}
