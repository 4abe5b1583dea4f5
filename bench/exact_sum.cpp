// bench_exact_sum: the cost per element of an exact sum (exact_sum.hpp) against a plain float
// sum, over the mlp's 1,863,690 parameters: adding one micro-batch partial (conversion in),
// merging two accumulators, and the one conversion back to float32; then the step's fixed-grid
// conversion (grid_sum.hpp's add_pieces), in tiles of `pieces` micro-batch partials at once,
// as Linear adds them. Median of the repetitions, one thread. Nothing here talks to MPI.
//   build/bench/bench_exact_sum [reps] [elements] [pieces]
#include "ringtrain/collectives/exact_sum.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "ringtrain/collectives/grid_sum.hpp"

namespace {

using ringtrain::collectives::ExactSum;
using ringtrain::collectives::GridSum;

constexpr std::size_t kMlpParams = 784 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 10 + 10;

// Median time of `body` in nanoseconds per element.
template <typename F>
double ns_per_element(F&& body, int reps, std::size_t elements) {
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    body();
    const auto t1 = std::chrono::steady_clock::now();
    times.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2] / static_cast<double>(elements);
}

// ns per element per piece of GridSum::add_pieces on one fixed block of x.size() elements,
// in tiles of 1<<16 floats with `pieces` partials each (Linear's shape, exact_step.hpp); every
// tile adds the same partials, from x, in cache as a layer's just-computed partials are.
std::pair<double, int> fixed_grid_add(const std::vector<float>& x, int pieces, int reps) {
  pieces = std::clamp(pieces, 1, 64);
  constexpr std::size_t kTile = std::size_t{1} << 16;
  const std::size_t n = x.size(), block[] = {n};
  GridSum sum(block);
  std::vector<float> tile(std::size_t(pieces) * kTile);
  for (std::size_t i = 0; i < tile.size(); ++i) tile[i] = x[i % n];
  const double ns = ns_per_element(
      [&] {
        sum.clear();
        sum.fix_grid(0, GridSum::power_above(1.0), pieces);
        for (std::size_t first = 0; first < n; first += kTile) {
          const std::size_t length = std::min(kTile, n - first);
          sum.add_pieces(0, first, length, std::span(tile).first(pieces * length), 0);
        }
      },
      reps, n * std::size_t(pieces));
  return {ns, pieces};
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 15;
  // A second argument sets the element count (a small one shows the cost in cache).
  const std::size_t n = argc > 2 ? static_cast<std::size_t>(std::atol(argv[2])) : kMlpParams;
  std::mt19937 rng(1);
  std::normal_distribution<float> gradient(0.0f, 1e-3f);  // gradient-like magnitudes
  std::vector<float> x(n), acc(n, 0.0f), out(n);
  for (float& v : x) v = gradient(rng);
  ExactSum sum(n), other(n);
  other.add(x);
  const double plain = ns_per_element(
      [&] {
        for (std::size_t i = 0; i < n; ++i) acc[i] += x[i];
      },
      reps, n);
  // kMaxTerms bounds the adds per block: clear before it would be reached.
  const double add = ns_per_element(
      [&] {
        if (sum.terms() + 1 >= ExactSum::kMaxTerms) sum.clear();
        sum.add(x);
      },
      reps, n);
  const double merge = ns_per_element(
      [&] {
        if (sum.terms() + other.terms() >= ExactSum::kMaxTerms) sum.clear();
        sum.merge(other);
      },
      reps, n);
  const double back = ns_per_element([&] { sum.to_float(out); }, reps, n);
  const auto [grid_add, pieces] = fixed_grid_add(x, argc > 3 ? std::atoi(argv[3]) : 4, reps);
  std::printf("exact sum over %zu elements, median of %d repetitions, ns per element\n", n, reps);
  std::printf("  float sum  acc += x          %6.3f\n", plain);
  std::printf("  add        (convert in)      %6.3f   %5.2fx the float sum\n", add, add / plain);
  std::printf("  merge      (two sums)        %6.3f   %5.2fx\n", merge, merge / plain);
  std::printf("  to_float   (convert back)    %6.3f   %5.2fx\n", back, back / plain);
  std::printf("  fixed grid (%d pieces a tile)  %6.3f   %5.2fx  per element per piece\n", pieces,
              grid_add, grid_add / plain);
  std::printf("checksum %g %g\n", static_cast<double>(acc[0]), static_cast<double>(out[0]));
  return 0;
}
