// bench_contained_data_load: what parsing a user's HDF5 dataset in the contained reader costs
// (checkpoint/data_file.hpp). Loads the same --data FILE.h5 (load_data: parse, map or read,
// check, digest, as a run does) three ways per round, in an order that rotates from round to
// round: in this process; through a reader child started at the load; through one started
// ahead (prepare_contained_reader(), then a pause standing for what a run does before it
// loads its data). Prints each way's median and the median per-round ratio to the in-process
// load, with its min-max. Run it with the file in the page cache (a first load warms it).
//   bench_contained_data_load FILE.h5 [--rounds 21] [--reader PATH] [--pause-ms 20]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "ringtrain/checkpoint/contained.hpp"
#include "ringtrain/framework/data/user_data.hpp"

namespace {

namespace ck = ringtrain::checkpoint;
enum class Way { kInProcess, kChildAtLoad, kChildAhead };

double load_s(const std::string& path, Way way, const std::string& reader, int pause_ms) {
  if (way == Way::kInProcess) {
    ck::disable_contained_reader();
  } else {
    ck::enable_contained_reader(reader);
    if (way == Way::kChildAhead) {
      ck::prepare_contained_reader();
      std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  const ringtrain::data::DataSplits d = ringtrain::data::load_data(path);
  const auto t1 = std::chrono::steady_clock::now();
  if (d.info.digest.empty()) throw std::runtime_error("no digest computed");
  return std::chrono::duration<double>(t1 - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_contained_data_load: an HDF5 dataset's load, in-process vs contained"};
  std::string path, reader = ck::default_reader_executable();
  int rounds = 21, pause_ms = 20;
  app.add_option("FILE", path, "an HDF5 dataset file (as --data)")->required();
  app.add_option("--rounds", rounds, "rounds of three loads")->check(CLI::Range(1, 1000));
  app.add_option("--reader", reader, "the reader executable")->capture_default_str();
  app.add_option("--pause-ms", pause_ms, "pause after starting a child ahead")
      ->check(CLI::Range(0, 10000));
  CLI11_PARSE(app, argc, argv);
  load_s(path, Way::kInProcess, reader, 0);  // warms the page cache
  const char* names[3] = {"in-process", "child at the load", "child ahead"};
  std::vector<double> times[3], ratios[3];
  for (int r = 0; r < rounds; ++r) {
    double t[3] = {};
    for (int k = 0; k < 3; ++k) {
      const int w = (r + k) % 3;
      t[w] = load_s(path, static_cast<Way>(w), reader, pause_ms);
    }
    for (int w = 0; w < 3; ++w) times[w].push_back(t[w]), ratios[w].push_back(t[w] / t[0]);
  }
  std::printf("%s, %d rounds, reader %s\n", path.c_str(), rounds, reader.c_str());
  for (int w = 0; w < 3; ++w)
    std::printf("%-18s median %.4f s   ratio to in-process: median %.3f (min %.3f, max %.3f)\n",
                names[w], median(times[w]), median(ratios[w]),
                *std::min_element(ratios[w].begin(), ratios[w].end()),
                *std::max_element(ratios[w].begin(), ratios[w].end()));
  return 0;
}
