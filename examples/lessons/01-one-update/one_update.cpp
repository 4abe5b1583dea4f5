// Lesson 1, part 1: the notes' example, computed by the two pieces the trainer uses.
//
//   rank 0 holds 1 sample whose gradient is 2            (its mean gradient: 2)
//   rank 1 holds 3 samples whose gradients are 4, 6, 8   (its mean gradient: 6)
//   the global batch: B = 4 samples, mean gradient (2 + 4 + 6 + 8) / 4 = 5
//
// sum-scaled (ringtrain):  rank r scales its *sum* by 1/B, the ring *sums*:
//                          2/4 + 18/4 = 5
// mean-of-means (common):  rank r takes its *mean*, the ranks' means are averaged:
//                          (2 + 6) / 2 = 4
//
// Run it with two ranks (more ranks hold no samples and show how the mistake grows):
//   mpiexec.mpich -n 2 build/examples/lessons/lesson01_one_update
#include <mpi.h>

#include <cstdio>
#include <vector>

#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/collectives/ring.hpp"
#include "ringtrain/framework/train/reduction.hpp"

int main(int argc, char** argv) {
  using namespace ringtrain;
  collectives::Environment mpi(&argc, &argv);
  const collectives::Communicator comm;
  const int rank = comm.rank(), n = comm.size();

  // This rank's per-sample gradients (one parameter, so one number per sample).
  const std::vector<float> mine = rank == 0   ? std::vector<float>{2}
                                  : rank == 1 ? std::vector<float>{4, 6, 8}
                                              : std::vector<float>{};
  const std::size_t global_samples = 4;  // B: every sample of this step, on any rank
  float local_sum = 0;
  for (float g : mine) local_sum += g;

  // What each rank contributes under a convention, then the collective sum (the ring).
  auto applied = [&](Reduction reduction, float* contribution) {
    const float scale = loss_scale(reduction, mine.size(), global_samples, n);
    std::vector<float> gradient = {scale * local_sum};
    *contribution = gradient[0];
    collectives::allreduce_sum(comm, gradient);
    return gradient[0];
  };
  float contribution[2];
  const float sum_scaled = applied(Reduction::kSumScaled, &contribution[0]);
  const float mean_of_means = applied(Reduction::kMeanOfMeans, &contribution[1]);

  // A table of every rank's line, gathered to rank 0 so the output is in rank order.
  const float row[4] = {float(mine.size()), local_sum, contribution[0], contribution[1]};
  std::vector<float> table(4 * static_cast<std::size_t>(n));
  MPI_Gather(row, 4, MPI_FLOAT, table.data(), 4, MPI_FLOAT, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    std::printf("%4s %8s %10s %12s %22s %24s\n", "rank", "samples", "sum of g", "mean of g",
                "sum-scaled sends", "mean-of-means sends");
    for (int r = 0; r < n; ++r) {
      const float* t = &table[4 * static_cast<std::size_t>(r)];
      std::printf("%4d %8.0f %10.3f %12s %14.3f (sum/B) %16.3f (mean/N)\n", r, t[0], t[1],
                  t[0] > 0 ? std::to_string(t[1] / t[0]).substr(0, 6).c_str() : "-", t[2], t[3]);
    }
    std::printf("\nafter the ring's sum (B = %zu samples, N = %d ranks):\n", global_samples, n);
    std::printf("  sum-scaled     applies %.3f = the mean gradient of the %zu samples\n", sum_scaled,
                global_samples);
    std::printf("  mean-of-means  applies %.3f = the mean of the ranks' means%s\n", mean_of_means,
                n > 2 ? " (empty ranks count as 0)" : "");
  }
  return 0;
}
