// bench_exact_allreduce: the exact allreduce (exact_sum.hpp) against the float ring over the
// mlp's 1,863,690 gradient elements, under mpiexec, in the same run: the ring's allreduce_sum
// of the floats, then allreduce_exact of one block holding one term per rank, then the
// conversions around it (add of the rank's floats, to_float after). Median over the
// repetitions of the slowest rank's time, in ms. Last, the variant that reduce-scatters the
// words and all-gathers the floats (conversion included), and the grid sum (grid_sum.hpp:
// one word per element), with four terms per rank too (m = 16 at N = 2), and its
// reduce-scatter and all-gather timed alone.
//   mpiexec.mpich -n 2 build/bench/bench_exact_allreduce [reps]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ringtrain/collectives/exact_sum.hpp"
#include "ringtrain/collectives/grid_sum.hpp"
#include "ringtrain/collectives/ring.hpp"
#include "ringtrain/collectives/small.hpp"

namespace {

using namespace ringtrain::collectives;

constexpr std::size_t kMlpParams = 784 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 10 + 10;

// Median over reps of the slowest rank's time of `body`, in ms. Collective.
template <typename F>
double median_ms(const Communicator& comm, F&& body, int reps) {
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    barrier(comm);
    const auto t0 = std::chrono::steady_clock::now();
    body();
    std::vector<double> ms{
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count()};
    allreduce_max(comm, ms);
    times.push_back(ms[0]);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  Environment env(&argc, &argv);
  Communicator comm;
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 11;
  const std::size_t n = kMlpParams;
  std::vector<float> grad(n), work(n), out(n);
  for (std::size_t i = 0; i < n; ++i)
    grad[i] = 1e-3f * static_cast<float>((i * 7919 + static_cast<std::size_t>(comm.rank())) % 1000);
  ExactSum sum(n);
  const double ring = median_ms(
      comm,
      [&] {
        work = grad;
        allreduce_sum(comm, std::span<float>(work));
      },
      reps);
  const double convert_in = median_ms(
      comm,
      [&] {
        sum.clear();
        sum.add(grad);
      },
      reps);
  const double exact = median_ms(
      comm,
      [&] {
        sum.clear();
        sum.add(grad);
        allreduce_exact(comm, sum);
      },
      reps);
  const double convert_out = median_ms(
      comm, [&] { sum.to_float(out); }, reps);
  const double scattered = median_ms(
      comm,
      [&] {
        sum.clear();
        sum.add(grad);
        allreduce_exact(comm, sum, out);
      },
      reps);
  const std::size_t block = n;
  GridSum grid(std::span<const std::size_t>(&block, 1));
  const double keep = median_ms(
      comm,
      [&] {
        grid.clear();
        grid.add(grad);
      },
      reps);
  const double on_grid = median_ms(
      comm,
      [&] {
        grid.clear();
        grid.add(grad);
        allreduce_grid(comm, grid, out);
      },
      reps);
  // Four terms per rank: the mlp's m = 16 at N = 2 (three copies, the last one borrowed).
  const double four_terms = median_ms(
      comm,
      [&] {
        grid.clear();
        for (int t = 0; t < 3; ++t) grid.add(grad);
        grid.add(grad, GridSum::Keep::kBorrow);
        allreduce_grid(comm, grid, out);
      },
      reps);
  // The parts of allreduce_grid's traffic alone: the words' reduce-scatter, the floats' gather.
  std::vector<std::int64_t> words(n);
  std::vector<int> counts;
  for (int r = 0; r < comm.size(); ++r)
    counts.push_back(static_cast<int>(chunk_size(n, static_cast<std::size_t>(comm.size()), r)));
  const double words_rs = median_ms(
      comm,
      [&] {
        MPI_Reduce_scatter(MPI_IN_PLACE, words.data(), counts.data(), MPI_INT64_T, MPI_SUM,
                           comm.handle());
      },
      reps);
  const double gather = median_ms(
      comm, [&] { all_gather(comm, std::span<float>(out)); }, reps);
  if (comm.rank() == 0) {
    std::printf("N=%d, %zu elements, median of %d, slowest rank, ms\n", comm.size(), n, reps);
    std::printf("  ring allreduce_sum (float)                   %8.2f\n", ring);
    std::printf("  ExactSum add (convert in)                    %8.2f\n", convert_in);
    std::printf("  add + allreduce_exact (words everywhere)     %8.2f   %5.2fx the ring\n", exact,
                exact / ring);
    std::printf("  to_float (convert back, every element)       %8.2f\n", convert_out);
    std::printf("  add + allreduce_exact to float (RS words,    %8.2f   %5.2fx the ring\n",
                scattered, scattered / ring);
    std::printf("    round own chunk, all-gather floats)\n");
    std::printf("  GridSum add (keep the term, scan exponents)  %8.2f\n", keep);
    std::printf("  add + allreduce_grid (agree, convert, RS     %8.2f   %5.2fx the ring\n", on_grid,
                on_grid / ring);
    std::printf("    one word per element, round own chunk, all-gather floats)\n");
    std::printf("  the same, four terms per rank (3 copies)     %8.2f   %5.2fx the ring\n",
                four_terms, four_terms / ring);
    std::printf("    of which: MPI_Reduce_scatter of the words  %8.2f\n", words_rs);
    std::printf("              the ring's all-gather of floats  %8.2f\n", gather);
  }
  return 0;
}
