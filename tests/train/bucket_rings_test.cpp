// The ring pool and the agreement on their own, without a model (bucket_rings.hpp,
// step_agreement.hpp, ring_poller.hpp). Facts, at N = 1, 2, 3:
//   - every bucket's ring sums its span of the gradient (values differ by rank and position,
//     so a misplaced element shows), in any completion order, polled by the main thread or
//     by the progress thread; the agreement applies the step;
//   - with ZeRO-1 (reduce-scatter, then all-gather of the parameters), this rank's chunk of
//     each bucket holds the sum, and after the all-gathers every rank holds every chunk;
//   - one NaN on one rank, in any bucket, makes every rank skip the step;
//   - the account counts one collective per ring run and the agreement (N > 1).
#include "train/sum/bucket_rings.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>
#include <vector>

#include "mpi_test.hpp"
#include "ringtrain/collectives/schedule.hpp"
#include "train/sum/bucket_plan.hpp"
#include "train/sum/ring_poller.hpp"
#include "train/sum/step_agreement.hpp"

using namespace ringtrain;
using namespace ringtrain::testing;
namespace coll = collectives;

namespace {

// Parameters of 5, 1, 7 and 2 floats in layers 0..3, buckets of at most 6 floats:
// {p3} {p2} {p0 p1}. p1 has fewer elements than ranks: empty chunks.
std::vector<ParameterEntry> params() {
  std::vector<ParameterEntry> e(4);
  const std::size_t sizes[] = {5, 1, 7, 2};
  for (std::size_t i = 0, offset = 0; i < 4; offset += sizes[i], ++i) {
    e[i].offset = offset;
    e[i].size = sizes[i];
    e[i].layer = i;
  }
  return e;
}
constexpr std::size_t kElements = 15;

float value(int rank, std::size_t i) {
  return float((rank + 1) * 100 + int(i));
}
float sum(int N, std::size_t i) {
  return float(50 * N * (N + 1) + N * int(i));
}

// Runs one step's sums on `grads` and the agreement, polled by `progress`'s owner: the main
// thread polls unless a thread does. Returns whether the step is applied.
bool sum_and_agree(BucketRings& rings, StepAgreement& agreement, RingPoller& progress,
                   std::span<float> grads, StepComm& account) {
  std::unique_lock lock(progress.mpi_mutex());
  rings.begin_step(2);
  agreement.begin_step();
  agreement.note_local(true, grads);
  for (std::size_t b = rings.size(); b-- > 0;) rings.start_sum(b, grads);  // any order
  progress.rings_started();
  while (!agreement.done() || rings.summed() < rings.size()) {
    if (progress.main_thread_polls()) rings.poll();
    agreement.advance(rings, account);
    lock.unlock();  // the thread may poll meanwhile
    lock.lock();
  }
  return agreement.applied();
}

}  // namespace

TEST_CASE("bucket rings sum every bucket and the ranks agree to apply the step") {
  coll::Communicator comm;
  const int N = comm.size(), r = comm.rank();
  const auto entries = params();
  const BucketPlan plan(entries, 6 * sizeof(float));
  REQUIRE(plan.size() == 3);
  for (const PollDriver driver : {PollDriver::kLayers, PollDriver::kThread})
    for (const bool zero : {false, true}) {
      StepComm account;
      BucketRings rings(comm, plan.buckets(), coll::RingOptions{}, zero, account);
      StepAgreement agreement(comm, rings.agreement_options());
      RingPoller progress(rings, driver, 20e-6, N);
      std::vector<float> grads(kElements), params_buffer(kElements, -1.0f);
      for (std::size_t i = 0; i < kElements; ++i) grads[i] = value(r, i);
      const bool applied = sum_and_agree(rings, agreement, progress, grads, account);
      bool ok = applied;
      // Allreduce: all of each bucket summed. ZeRO-1: this rank's chunk of each bucket.
      for (const coll::Bucket& k : plan.buckets()) {
        const std::size_t begin = zero ? coll::chunk_begin(k.elements, N, r) : 0;
        const std::size_t count = zero ? coll::chunk_size(k.elements, N, r) : k.elements;
        for (std::size_t i = k.offset + begin; i < k.offset + begin + count; ++i) {
          ok = ok && grads[i] == sum(N, i);
          params_buffer[i] = -sum(N, i);  // the "updated parameters" of this rank's chunk
        }
      }
      if (zero) {
        std::lock_guard lock(progress.mpi_mutex());
        for (std::size_t b = 0; b < rings.size(); ++b) {
          rings.mark_updated(b);
          rings.start_gather(b, params_buffer);
          rings.wait(b);
        }
        ok = ok && rings.gathered() == rings.size() && !rings.in_flight();
        for (std::size_t i = 0; i < kElements; ++i) ok = ok && params_buffer[i] == -sum(N, i);
      }
      const std::size_t rings_run = N > 1 ? (zero ? 2 : 1) * plan.size() + 1 : 0;
      ok = ok && account.collectives == rings_run && account.bytes == kElements * 4.0;
      INFO("N = " << N << ", driver " << to_string(driver) << ", zero " << zero);
      REQUIRE(all_ranks(ok));
    }
}

TEST_CASE("one NaN on one rank, in any bucket: every rank skips the step") {
  coll::Communicator comm;
  const int N = comm.size(), r = comm.rank();
  const auto entries = params();
  const BucketPlan plan(entries, 6 * sizeof(float));
  StepComm account;
  for (const bool zero : {false, true}) {
    BucketRings rings(comm, plan.buckets(), coll::RingOptions{}, zero, account);
    StepAgreement agreement(comm, rings.agreement_options());
    RingPoller progress(rings, PollDriver::kLayers, 20e-6, N);
    for (std::size_t bad = 0; bad < kElements; ++bad) {
      std::vector<float> grads(kElements);
      for (std::size_t i = 0; i < kElements; ++i) grads[i] = value(r, i);
      if (r == N - 1) grads[bad] = NAN;
      const bool applied = sum_and_agree(rings, agreement, progress, grads, account);
      INFO("N = " << N << ", zero " << zero << ", NaN at " << bad << " on rank " << N - 1);
      REQUIRE(all_ranks(!applied));
    }
    // And the same rings apply a clean step afterwards.
    std::vector<float> grads(kElements, 1.0f);
    REQUIRE(all_ranks(sum_and_agree(rings, agreement, progress, grads, account)));
  }
}
