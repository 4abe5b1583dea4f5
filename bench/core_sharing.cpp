// How much sgemm throughput the machine's cores give together.
//
// Data-parallel speed on one node is bounded by what the cores deliver *together*: two ranks
// with one BLAS thread each can at most add up what two single-threaded sgemm processes
// reach side by side. This program measures, for each shape:
//
//   alone   one process, one thread
//   pair    two processes, one thread each, timed over the same interval (started together)
//   2thr    one process, two threads
//
// and prints GFLOP/s and the ratios pair/alone (sum of both) and 2thr/alone. On a machine
// with two independent cores both ratios are near 2; where the two "cores" share one
// physical core's vector units they are near 1, and that bounds every N=2 speed-up.
//
//   build/bench/bench_core_sharing [--shapes 1024x1024x1024,64x1024x1024] [--seconds 3]
//
// Shapes are MxNxK of C(M,N) = A(M,K)·B(K,N); 64x1024x1024 is one mlp layer's forward at
// 64 samples per rank. Workers are this program again (--worker), started with a common
// start time so that both run during the same seconds.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "ringtrain/framework/blas.hpp"

namespace {

using namespace ringtrain;

struct Shape {
  int m, n, k;
};

Shape parse_shape(const std::string& text) {
  Shape s{};
  char x1 = 0, x2 = 0;
  if (std::sscanf(text.c_str(), "%d%c%d%c%d", &s.m, &x1, &s.n, &x2, &s.k) != 5 || x1 != 'x' ||
      x2 != 'x' || s.m < 1 || s.n < 1 || s.k < 1)
    throw std::invalid_argument("shape '" + text + "': expected MxNxK with positive sizes");
  return s;
}

double wall_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// GFLOP/s of repeated products of one shape from `start` (wall clock) for `seconds`.
double gflops(const Shape& s, double start, double seconds) {
  std::vector<float> a(std::size_t(s.m) * s.k, 0.5f), b(std::size_t(s.k) * s.n, 0.25f),
      c(std::size_t(s.m) * s.n);
  auto product = [&] {
    blas::gemm(blas::Trans::kNo, blas::Trans::kNo, s.m, s.n, s.k, 1.0f, a.data(), b.data(), 0.0f,
               c.data());
  };
  product();  // warm: packing buffers, pages
  while (wall_s() < start) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const double t0 = wall_s();
  long done = 0;
  while (wall_s() - t0 < seconds) {
    product();
    ++done;
  }
  return 2.0 * s.m * s.n * s.k * double(done) / (wall_s() - t0) / 1e9;
}

// Runs `copies` single-threaded workers of this program at once; returns their GFLOP/s.
std::vector<double> run_workers(const std::string& self, const std::string& shape, int copies,
                                double seconds) {
  const double start = wall_s() + 1.0;  // time for both to start and warm up
  std::vector<std::unique_ptr<FILE, int (*)(FILE*)>> pipes;
  for (int i = 0; i < copies; ++i) {
    const std::string cmd =
        fmt::format("'{}' --worker {} --start {:.6f} --seconds {}", self, shape, start, seconds);
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) throw std::runtime_error("cannot start worker: " + cmd);
    pipes.emplace_back(p, pclose);
  }
  std::vector<double> out;
  for (auto& p : pipes) {
    double rate = 0.0;
    if (std::fscanf(p.get(), "%lf", &rate) != 1) throw std::runtime_error("a worker failed");
    out.push_back(rate);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  blas::reexec_with_better_core(argv);
  CLI::App app{"sgemm throughput of one core, two processes side by side, and two threads"};
  std::string shapes_arg = "1024x1024x1024,64x1024x1024", worker_shape;
  double seconds = 3.0, start = 0.0;
  app.add_option("--shapes", shapes_arg, "comma-separated MxNxK")->capture_default_str();
  app.add_option("--seconds", seconds, "timed seconds per measurement")->capture_default_str();
  app.add_option("--worker", worker_shape, "internal: measure this shape, print GFLOP/s");
  app.add_option("--start", start, "internal: wall-clock start time of a worker");
  CLI11_PARSE(app, argc, argv);
  try {
    if (!worker_shape.empty()) {
      blas::set_threads(1);
      std::printf("%.3f\n", gflops(parse_shape(worker_shape), start, seconds));
      return 0;
    }
    if (seconds <= 0) throw std::invalid_argument("--seconds must be > 0");
    std::printf("%s; %d cores\n", blas::core_report().c_str(), blas::available_cores());
    std::printf("%-16s %9s %19s %9s %10s %10s\n", "shape MxNxK", "alone", "pair (each)", "2thr",
                "pair/alone", "2thr/alone");
    std::string rest = shapes_arg;
    while (!rest.empty()) {
      const std::size_t comma = rest.find(',');
      const std::string text = rest.substr(0, comma);
      rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
      const Shape s = parse_shape(text);
      const double alone = run_workers(argv[0], text, 1, seconds)[0];
      const std::vector<double> pair = run_workers(argv[0], text, 2, seconds);
      blas::set_threads(2);
      const double two = gflops(s, wall_s(), seconds);
      std::printf("%-16s %9.1f %9.1f %9.1f %9.1f %10.2f %10.2f\n", text.c_str(), alone, pair[0],
                  pair[1], two, (pair[0] + pair[1]) / alone, two / alone);
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_core_sharing: %s\n", e.what());
    return 1;
  }
  return 0;
}
