// `ringtrain bench allreduce`, the sweep: how one size is timed (bench_allreduce.cpp has the
// whole method). Vocabulary: a *call* is one allreduce; a *batch* is back-to-back calls after a
// barrier, timed on every rank; a *sample* is one batch of the ring and one of MPI_Allreduce
// (which goes first alternates); a size's time is the median over samples of the slowest
// rank's time per call. Also here: the single-core memcpy reference that busbw is compared
// with, sampled between the calls of the largest size, and the cost of the size-agreement
// check. Every function here but median is collective: all ranks call it in the same order.
#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "bench_allreduce.hpp"

namespace ringtrain::cli::allreduce_bench {

namespace {

constexpr double kBatchSeconds = 10e-3;  // a timed sample lasts at least this long
constexpr int kMaxBatch = 1024;          // ... or has this many calls

// Element-wise max over ranks: a call lasts as long as its slowest rank. (Untimed; the
// harness itself never calls MPI's busy-polling collectives, see run_bench.)
void max_over_ranks(const coll::Communicator& comm, std::vector<double>& v) {
  coll::allreduce_max(comm, v);
}

// One single-core memcpy of `from` into `to` on rank 0 while the others sleep in a barrier;
// returns the seconds it took on rank 0 (0 elsewhere).
double time_memcpy(const coll::Communicator& comm, std::span<float> from, std::span<float> to) {
  coll::barrier(comm, coll::WaitPolicy::kSleep);
  double seconds = 0;
  if (comm.rank() == 0) {
    const double t0 = MPI_Wtime();
    std::memcpy(to.data(), from.data(), from.size_bytes());
    seconds = MPI_Wtime() - t0;
  }
  coll::barrier(comm, coll::WaitPolicy::kSleep);
  return seconds;
}

}  // namespace

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Median cost of the size-agreement check: the ring's polite one and an MPI_Allreduce of
// (min, max) as the guidance first suggested. Each sample is a batch of calls lasting about
// kBatchSeconds (at most kMaxCheckBatch calls), sized from one timed call of each, agreed
// over the ranks: oversubscribed, one MPI_Allreduce can take milliseconds.
std::pair<double, double> size_check_cost(const coll::Communicator& comm, coll::WaitPolicy wait) {
  constexpr int kSamples = 11, kMaxCheckBatch = 200;
  auto ring_check = [&] { coll::check_same_size(comm, 1000, "bench", wait); };
  auto mpi_check = [&] {
    long long minmax[2] = {-1000, 1000};  // (-M, M) under MPI_MAX gives (-min, max)
    coll::check_mpi(MPI_Allreduce(MPI_IN_PLACE, minmax, 2, MPI_LONG_LONG, MPI_MAX, comm.handle()),
                    "MPI_Allreduce");
  };
  auto per_call = [&](auto& check, int calls) {
    coll::barrier(comm, wait);
    const double t0 = MPI_Wtime();
    for (int k = 0; k < calls; ++k) check();
    return (MPI_Wtime() - t0) / calls;
  };
  double probe[2] = {per_call(ring_check, 1), per_call(mpi_check, 1)};
  coll::allreduce_max(comm, std::span<double>(probe));
  auto batch_for = [&](double call_s) {
    return std::clamp(static_cast<int>(kBatchSeconds / std::max(call_s, 1e-9)), 1, kMaxCheckBatch);
  };
  const int ring_batch = batch_for(probe[0]), mpi_batch = batch_for(probe[1]);
  std::vector<double> ring(kSamples), mpi(kSamples);
  for (std::size_t i = 0; i < ring.size(); ++i) {
    ring[i] = per_call(ring_check, ring_batch);
    mpi[i] = per_call(mpi_check, mpi_batch);
  }
  max_over_ranks(comm, ring);
  max_over_ranks(comm, mpi);
  return {median(ring), median(mpi)};
}

MemcpyReference::MemcpyReference(std::size_t bytes, bool huge_pages)
    : bytes_(bytes),
      from_(bytes / sizeof(float), huge_pages),
      to_(bytes / sizeof(float), huge_pages) {
  std::fill(from_.span().begin(), from_.span().end(), 1.0f);
}

void MemcpyReference::sample(const coll::Communicator& comm) {
  seconds_.push_back(time_memcpy(comm, from_.span(), to_.span()));
}

double MemcpyReference::bandwidth_Bps(const coll::Communicator& comm) const {
  double Bps = comm.rank() == 0 ? static_cast<double>(bytes_) / median(seconds_) : 0;
  coll::allreduce_max(comm, std::span<double>(&Bps, 1));
  return Bps;
}

namespace {

// Times the ring and MPI_Allreduce on one buffer. Collective: every rank calls the same
// methods in the same order.
class SizeTimer {
 public:
  SizeTimer(const coll::Communicator& comm, const Plan& plan, coll::RingTransfer& transfer,
            std::span<float> buffer)
      : comm_(comm), plan_(plan), transfer_(transfer), buffer_(buffer) {}

  // Seconds per call of a batch of `calls` back-to-back calls, on this rank. One untimed
  // call first: after the other implementation's calls (MPICH's spinning leaves the
  // scheduler's accounting lopsided at N > cores) the first call can take a millisecond
  // that belongs to neither; a training loop calling one collective repeatedly never sees it.
  double batch(bool use_ring, int calls) {
    coll::barrier(comm_, plan_.resolved);
    one_call(use_ring);
    const double t0 = MPI_Wtime();
    for (int k = 0; k < calls; ++k) one_call(use_ring);
    return (MPI_Wtime() - t0) / calls;
  }

  // The batch length: doubled until a batch lasts kBatchSeconds on the slowest rank (the
  // first call after a barrier is slow when ranks share cores, so one call is a poor
  // estimate). Sets per_call_s to that batch's time per call, agreed over the ranks.
  int calibrate(bool use_ring, double& per_call_s) {
    for (int calls = 1;; calls *= 2) {
      per_call_s = batch(use_ring, calls);
      coll::allreduce_max(comm_, std::span<double>(&per_call_s, 1));
      if (per_call_s * calls >= kBatchSeconds || calls >= kMaxBatch) return calls;
    }
  }

  const coll::Counters& ring_counters() const { return counters_; }

 private:
  void one_call(bool use_ring) {
    if (use_ring && plan_.ring.algorithm == coll::Algorithm::kHierarchical)
      counters_ = coll::hierarchical_allreduce(hierarchical_, comm_, buffer_, plan_.ring);
    else if (use_ring)
      counters_ =
          coll::run_collective(transfer_, comm_, buffer_, coll::Collective::kAllreduce, plan_.ring);
    else
      coll::run_collective(transfer_, comm_, buffer_, coll::Collective::kAllreduce, plan_.mpi);
  }

  const coll::Communicator& comm_;
  const Plan& plan_;
  coll::RingTransfer& transfer_;
  coll::HierarchicalTransfer hierarchical_;  // --collective hierarchical, reused per size
  std::span<float> buffer_;
  coll::Counters counters_;
};

// One size: warm-up, calibration, then `repeats` samples in which the ring and MPI
// alternate (and which goes first alternates too); the memcpy reference is sampled in
// between at the largest size. Returns the ring's row and MPI's row. Collective.
std::pair<Row, Row> time_size(const coll::Communicator& comm, const Settings& settings,
                              const Plan& plan, coll::RingTransfer& transfer,
                              std::span<float> buffer, MemcpyReference& reference) {
  std::fill(buffer.begin(), buffer.end(), 1.0f);
  SizeTimer timer(comm, plan, transfer, buffer);
  for (int i = 0; i < settings.warmup; ++i) {
    timer.batch(true, 1);
    timer.batch(false, 1);
  }
  double ring_call_s = 0, mpi_call_s = 0;
  const int ring_calls = timer.calibrate(true, ring_call_s);
  const int mpi_calls = timer.calibrate(false, mpi_call_s);
  const double sample_s = std::max(ring_calls * ring_call_s, mpi_calls * mpi_call_s);
  const int repeats = std::clamp(static_cast<int>(settings.seconds_per_size / sample_s),
                                 settings.min_repeats, settings.max_repeats);
  std::vector<double> ring_s(static_cast<std::size_t>(repeats)), mpi_s(ring_s.size());
  for (std::size_t i = 0; i < ring_s.size(); ++i) {
    if (i % 2 == 0) {
      ring_s[i] = timer.batch(true, ring_calls);
      mpi_s[i] = timer.batch(false, mpi_calls);
    } else {
      mpi_s[i] = timer.batch(false, mpi_calls);
      ring_s[i] = timer.batch(true, ring_calls);
    }
    if (buffer.size_bytes() == plan.largest) reference.sample(comm);
  }
  max_over_ranks(comm, ring_s);
  max_over_ranks(comm, mpi_s);
  const std::size_t bytes = buffer.size_bytes();
  return {Row{"ring", bytes, median(ring_s), repeats, ring_calls, timer.ring_counters()},
          Row{"mpi", bytes, median(mpi_s), repeats, mpi_calls, {}}};
}

}  // namespace

// Every size in turn; rows come in pairs (ring, mpi) per size. Rank 0 prints each size's
// line as soon as it is measured. Collective.
std::vector<Row> sweep(const coll::Communicator& comm, const Settings& settings, const Plan& plan,
                       MemcpyReference& reference) {
  coll::RingTransfer transfer;  // planned once, reused for every call
  Buffer data(plan.largest / sizeof(float), !settings.small_pages);
  std::vector<Row> rows;
  for (std::size_t bytes : plan.sizes) {
    std::span<float> buffer = data.span().first(bytes / sizeof(float));
    const auto [r, m] = time_size(comm, settings, plan, transfer, buffer, reference);
    rows.push_back(r);
    rows.push_back(m);
    if (comm.rank() == 0) print_size(r, m, comm.size());
  }
  return rows;
}

}  // namespace ringtrain::cli::allreduce_bench
