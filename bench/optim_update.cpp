// bench_optim_update: the time of one optimizer update over the mlp's 1,863,690 parameters
// (784·1024 + 1024 + 1024·1024 + 1024 + 1024·10 + 10), single-threaded and split over two
// std::threads, and the ratio of the two: whether splitting the update is worth it.
//   build/bench/bench_optim_update
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "ringtrain/framework/optim/optimizer.hpp"

namespace ringtrain {
namespace {

constexpr std::size_t kMlpParams = 784 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 10 + 10;

struct Timing {
  double median_ms, min_ms;
};

template <typename F>
Timing time_ms(F&& body, int reps) {
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    body();
    const auto t1 = std::chrono::steady_clock::now();
    times.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(times.begin(), times.end());
  return {times[times.size() / 2], times.front()};
}

void bench(const OptimizerConfig& config) {
  const std::size_t n = kMlpParams, half = n / 2;
  std::vector<float> p(n, 0.5f), g(n, 0.01f);
  auto whole = make_optimizer(config, n);
  auto lo = make_optimizer(config, half);
  auto hi = make_optimizer(config, n - half);
  const std::span<float> ps(p);
  const std::span<const float> gs(g);
  for (int w = 0; w < 5; ++w) whole->step(p, g, 1e-3f);  // touch every page first
  const Timing one = time_ms([&] { whole->step(p, g, 1e-3f); }, 200);
  const Timing two = time_ms(
      [&] {
        std::thread t([&] { hi->step(ps.subspan(half), gs.subspan(half), 1e-3f); });
        lo->step(ps.first(half), gs.first(half), 1e-3f);
        t.join();
      },
      200);
  std::printf(
      "%s over %zu params, median (min) of 200:\n  1 thread %.3f (%.3f) ms, "
      "2 threads %.3f (%.3f) ms: 2 threads take %.2fx the time of 1\n",
      whole->describe().c_str(), n, one.median_ms, one.min_ms, two.median_ms, two.min_ms,
      two.median_ms / one.median_ms);
}

}  // namespace
}  // namespace ringtrain

int main() {
  using namespace ringtrain;
  OptimizerConfig sgd;
  bench(sgd);
  sgd.nesterov = true;
  sgd.weight_decay = 5e-4f;
  bench(sgd);
  OptimizerConfig adamw;
  adamw.name = "adamw";
  adamw.weight_decay = 0.01f;
  bench(adamw);
}
