// `ringtrain bench allreduce`: the hand-written ring against MPI_Allreduce, size by size, in
// the same run, and the α-β model fitted to the ring's times.
//
// For each size (4 B .. 64 MiB by default): warm-up calls of both, then `repeats` samples in
// which the ring and MPI_Allreduce alternate (which goes first alternates too). A sample is a
// barrier and then a batch of back-to-back calls (doubled until it lasts 10 ms), timed
// on every rank; its time per call is the slowest rank's batch time over the batch length,
// and a size's time is the median over samples. (Batches, as in nccl-tests and OSU: with 4
// ranks on 2 cores a single call after a barrier mostly measures how late the scheduler lets
// the last rank out of the barrier, ~0.3 ms, not the call.) Prints time, algbw = M/t, busbw =
// algbw·2(N-1)/N, the ratio ring/MPI, and the model's prediction with its residual; also the
// single-core memcpy bandwidth on 64 MiB (rank 0 alone, the others asleep) as the ceiling to
// compare busbw with, and what the size-agreement check costs. Only rank 0 prints.
//
// The run, in order: make_plan (sizes, options) -> size_check_cost -> sweep (time_size per
// size, the memcpy reference sampled at the largest) -> the α-β fit -> print_fit,
// print_summary, print_traffic, print_wire -> write_json.
//
// --collective hierarchical puts the two-level allreduce (hierarchical.hpp) in the ring's
// place, hosts grouped as MPI reports them or by --ranks-per-host K: the "ring" rows and
// columns are then its times and counters (with the inter-host ones in the JSON), the α-β
// fit is a one-level fit of its times, and the memory-traffic table (a flat-ring model) is
// left out.
//
// --wire bf16 puts the ring's messages on the wire as bf16 (ring_transfer.hpp; with
// hierarchical only the cross-host ring's, hierarchical.hpp); MPI_Allreduce stays fp32, the
// reference. The wire-bytes table (and the JSON rows) give the bytes one rank sends per call,
// split into intra-host and inter-host for hierarchical (the flat ring does not know where
// ranks sit, so its split is left empty), beside the measured time. Sizes, algbw, busbw and
// the α-β fit stay in fp32 payload bytes M whatever the wire carries, so fp32 and bf16 runs
// compare directly; the memory-traffic table (fp32 copies) is left out for bf16.
#include <fmt/core.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.hpp"
#include "ringtrain/collectives/buffer.hpp"
#include "ringtrain/collectives/collectives.hpp"
#include "ringtrain/collectives/cost_model.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/train/modes.hpp"

namespace ringtrain::cli {

namespace {

namespace coll = ringtrain::collectives;

constexpr double kBatchSeconds = 10e-3;  // a timed sample lasts at least this long
constexpr int kMaxBatch = 1024;          // ... or has this many calls

struct Settings {
  std::string json_path;
  std::vector<std::string> sizes;  // "4", "64K", "1M"; empty: 4 B .. 64 MiB in powers of two
  int warmup = 2;
  int min_repeats = 5, max_repeats = 100;
  double seconds_per_size = 0.3;  // per implementation, to choose the repeats
  std::size_t segment_bytes = coll::RingOptions{}.segment_bytes;
  std::size_t segments_in_flight = coll::RingOptions{}.segments_in_flight;
  std::string wait = "auto";
  bool no_size_check = false;
  bool small_pages = false;  // plain std::vector buffers instead of huge pages
  std::string collective = "ring";  // or "hierarchical", in the ring's place
  int ranks_per_host = 0;           // hierarchical: hosts of K consecutive ranks; 0: MPI's
  std::string wire = "fp32";        // the ring's wire format: fp32 or bf16 (MPI's stays fp32)
};

struct Row {
  std::string impl;  // "ring" or "mpi"
  std::size_t bytes = 0;
  double median_s = 0;
  int repeats = 0;           // timed samples
  int calls_per_sample = 1;  // back-to-back calls in one sample
  coll::Counters counters;
};

std::size_t parse_size(const std::string& text) {
  std::size_t pos = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(text, &pos);
  } catch (const std::exception&) {
    throw UsageError("--sizes: '" + text + "' is not a size (examples: 4, 64K, 16M)");
  }
  std::string unit = text.substr(pos);
  std::size_t scale = 1;
  if (unit == "K" || unit == "KiB")
    scale = 1024;
  else if (unit == "M" || unit == "MiB")
    scale = 1024 * 1024;
  else if (unit == "G" || unit == "GiB")
    scale = std::size_t{1} << 30;
  else if (!unit.empty() && unit != "B")
    throw UsageError("--sizes: unknown unit in '" + text + "' (use B, K, M or G)");
  const std::size_t bytes = value * scale;
  if (bytes == 0 || bytes % sizeof(float) != 0)
    throw UsageError("--sizes: " + text + " is not a positive multiple of 4 bytes (floats)");
  return bytes;
}

std::string human(double bytes) {
  if (bytes >= 1024.0 * 1024) return fmt::format("{:g} MiB", bytes / (1024.0 * 1024));
  if (bytes >= 1024) return fmt::format("{:g} KiB", bytes / 1024);
  return fmt::format("{:g} B", bytes);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Element-wise max over ranks: a call lasts as long as its slowest rank. (Untimed; the
// harness itself never calls MPI's busy-polling collectives, see run_bench.)
void max_over_ranks(const coll::Communicator& comm, std::vector<double>& v) {
  coll::allreduce_max(comm, v);
}

// Buffers of the kind the sweep uses: huge-page backed (buffer.hpp), or plain vectors.
class Buffer {
 public:
  Buffer(std::size_t elements, bool huge_pages) {
    if (huge_pages)
      huge_ = coll::HugePageBuffer(elements);
    else
      plain_.assign(elements, 0.0f);
  }
  std::span<float> span() { return huge_.size() ? huge_.span() : std::span<float>(plain_); }

 private:
  coll::HugePageBuffer huge_;
  std::vector<float> plain_;
};

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

// What a run measures, resolved from the settings: the sizes, both implementations'
// options, and the size of the memcpy reference.
struct Plan {
  std::vector<std::size_t> sizes;
  coll::RingOptions ring;  // the hand-written ring (or the hierarchical one), as the flags ask
  coll::RingOptions mpi;                                // plain MPI_Allreduce
  coll::WaitPolicy resolved = coll::WaitPolicy::kSpin;  // ring.wait for this machine
  std::size_t largest = 0;                              // bytes of the largest size
  std::size_t memcpy_bytes = 0;  // the memcpy reference: 64 MiB or the largest size
};

// `hierarchy`: set for --collective hierarchical, which then runs in the ring's place.
Plan make_plan(const Settings& settings, const coll::Communicator& comm,
               const coll::Hierarchy* hierarchy) {
  Plan plan;
  if (hierarchy != nullptr) {
    plan.ring.algorithm = coll::Algorithm::kHierarchical;
    plan.ring.hierarchy = hierarchy;
  }
  plan.ring.wire = parse_choice<coll::Wire>(settings.wire, "--wire");
  for (const std::string& s : settings.sizes) plan.sizes.push_back(parse_size(s));
  if (plan.sizes.empty())
    for (std::size_t b = 4; b <= 64u * 1024 * 1024; b *= 2) plan.sizes.push_back(b);
  if (settings.min_repeats < 1 || settings.max_repeats < settings.min_repeats)
    throw UsageError("--repeats: need 1 <= min <= max");

  plan.ring.segment_bytes = settings.segment_bytes;
  plan.ring.segments_in_flight = settings.segments_in_flight;
  try {
    plan.ring.wait = coll::parse_wait_policy(settings.wait);
  } catch (const coll::CollectiveError& e) {
    throw UsageError(std::string("--wait: ") + e.what());
  }
  plan.ring.check_sizes = !settings.no_size_check;
  plan.mpi.algorithm = coll::Algorithm::kMpi;
  plan.mpi.check_sizes = false;  // plain MPI_Allreduce
  plan.resolved = coll::resolve_wait_policy(plan.ring.wait, comm);
  plan.largest = *std::max_element(plan.sizes.begin(), plan.sizes.end());
  plan.memcpy_bytes = std::max<std::size_t>(plan.largest, 64u << 20);
  return plan;
}

// The memcpy reference: single-core copies of memcpy_bytes on rank 0, timed between the
// ring and MPI calls of the largest size so that all three see the same machine.
class MemcpyReference {
 public:
  MemcpyReference(std::size_t bytes, bool huge_pages)
      : bytes_(bytes),
        from_(bytes / sizeof(float), huge_pages),
        to_(bytes / sizeof(float), huge_pages) {
    std::fill(from_.span().begin(), from_.span().end(), 1.0f);
  }
  // Collective: one timed copy (rank 0 copies, the others sleep in a barrier).
  void sample(const coll::Communicator& comm) {
    seconds_.push_back(time_memcpy(comm, from_.span(), to_.span()));
  }
  // Collective: the median copy's bytes per second (rank 0 measured it), on every rank.
  double bandwidth_Bps(const coll::Communicator& comm) const {
    double Bps = comm.rank() == 0 ? static_cast<double>(bytes_) / median(seconds_) : 0;
    coll::allreduce_max(comm, std::span<double>(&Bps, 1));
    return Bps;
  }
  std::size_t bytes() const { return bytes_; }

 private:
  std::size_t bytes_;
  Buffer from_, to_;
  std::vector<double> seconds_;
};

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

double bus_factor(int N) {
  return N > 1 ? 2.0 * (N - 1) / N : 0.0;
}

// What the ring (or the hierarchical allreduce) puts on the wire, in words.
std::string wire_text(const coll::RingOptions& ring) {
  if (ring.wire == coll::Wire::kFp32) return "fp32";
  if (ring.algorithm == coll::Algorithm::kHierarchical)
    return "bf16 between hosts (the cross-host ring rounds; within a host fp32)";
  return "bf16 (every ring message rounded to nearest even, added in fp32)";
}

void print_header(const coll::Communicator& comm, const Settings& settings, const Plan& plan,
                  std::pair<double, double> check_s) {
  const coll::Hierarchy* h = plan.ring.hierarchy;
  fmt::print(
      "allreduce: {} vs MPI_Allreduce, N = {} ({} per node, {} cores), wait {} "
      "(resolved: {}), segment {}, {} in flight, size check {}\n",
      h ? fmt::format("hierarchical ({} hosts, smallest {} ranks; the ring columns are its)",
                      h->layout().hosts, h->layout().host_chunks)
        : std::string("ring"),
      comm.size(), comm.ranks_per_node(), coll::available_cores(), settings.wait,
      coll::to_string(plan.resolved), human(static_cast<double>(plan.ring.segment_bytes)),
      plan.ring.segments_in_flight, plan.ring.check_sizes ? "on" : "off");
  fmt::print("wire: {}; MPI_Allreduce: fp32\n", wire_text(plan.ring));
  fmt::print("buffers: {}; size check alone: ring {:.1f} us, MPI_Allreduce {:.1f} us\n\n",
             settings.small_pages ? "std::vector (4 KiB pages)" : "huge pages (buffer.hpp)",
             check_s.first * 1e6, check_s.second * 1e6);
  fmt::print("{:>10} {:>11} {:>11} {:>9} {:>11} {:>11} {:>11}\n", "size", "ring ms", "MPI ms",
             "ring/MPI", "ring algbw", "ring busbw", "MPI busbw");
}

void print_size(const Row& r, const Row& m, int N) {
  const double algbw = static_cast<double>(r.bytes) / r.median_s / 1e9;
  const double mpi_algbw = static_cast<double>(r.bytes) / m.median_s / 1e9;
  fmt::print("{:>10} {:>11.4f} {:>11.4f} {:>9.3f} {:>11.3f} {:>11.3f} {:>11.3f}\n",
             human(static_cast<double>(r.bytes)), r.median_s * 1e3, m.median_s * 1e3,
             r.median_s / m.median_s, algbw, algbw * bus_factor(N), mpi_algbw * bus_factor(N));
  std::fflush(stdout);
}

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

// The ring's medians, the points the α-β model is fitted to.
std::vector<coll::Sample> ring_samples(const std::vector<Row>& rows) {
  std::vector<coll::Sample> samples;
  for (const Row& r : rows)
    if (r.impl == "ring") samples.push_back({static_cast<double>(r.bytes), r.median_s});
  return samples;
}

void print_fit(const coll::CostFit& fit, const std::vector<coll::Sample>& samples) {
  fmt::print(
      "\nalpha-beta model t = 2(N-1)a + 2(N-1)/N M/B, fitted to the ring "
      "(least squares on relative error):\n  {}\n",
      fit.note);
  if (fit.residuals.empty()) return;
  fmt::print("{:>10} {:>12} {:>12} {:>9}\n", "size", "measured ms", "model ms", "residual");
  for (std::size_t i = 0; i < samples.size(); ++i)
    fmt::print("{:>10} {:>12.4f} {:>12.4f} {:>8.1f}%\n", human(samples[i].bytes),
               samples[i].seconds * 1e3, fit.predicted_s[i] * 1e3, 100 * fit.residuals[i]);
}

// The figures the targets are stated in: ring/MPI at >= 1 MiB, the smallest speed-up, and
// busbw at the largest size against the memcpy reference.
void print_summary(const std::vector<Row>& rows, int N, double memcpy_Bps,
                   std::size_t memcpy_bytes) {
  std::vector<double> big_ratios;
  for (std::size_t i = 0; i + 1 < rows.size(); i += 2)
    if (rows[i].bytes >= (1u << 20)) big_ratios.push_back(rows[i].median_s / rows[i + 1].median_s);
  double worst_speedup = 1e300;
  for (std::size_t i = 0; i + 1 < rows.size(); i += 2)
    worst_speedup = std::min(worst_speedup, rows[i + 1].median_s / rows[i].median_s);
  fmt::print(
      "\nsummary: ring/MPI median over sizes >= 1 MiB: {}; smallest MPI/ring speed-up "
      "over all sizes: {:.2f}x\n",
      big_ratios.empty() ? std::string("-") : fmt::format("{:.3f}", median(big_ratios)),
      worst_speedup);
  const Row& last = rows[rows.size() - 2];
  const double busbw = static_cast<double>(last.bytes) / last.median_s * bus_factor(N);
  fmt::print(
      "         busbw at {}: {:.2f} GB/s = {:.0f}% of single-core memcpy of {} "
      "({:.2f} GB/s, same run)\n",
      human(static_cast<double>(last.bytes)), busbw / 1e9, 100 * busbw / memcpy_Bps,
      human(static_cast<double>(memcpy_bytes)), memcpy_Bps / 1e9);
}

// Memory traffic, the floor under any ring built on MPI messages once the data no longer
// fits in cache (smaller sizes run faster than this estimate). With one copy per
// message, a rank moves 7(N-1)/N · M bytes through memory: in each of the N-1
// reduce-scatter rounds 2·M/N to copy the received chunk (read + write) and 3·M/N to add
// it into place (read both, write one); in each all-gather round 2·M/N to copy. N ranks
// do this at once on min(N, cores) cores, each core moving 2 × memcpy bytes per second.
// At N = 2 that is 1.75 × the traffic of a copy (busbw at most 57 % of memcpy).
void print_traffic(const std::vector<Row>& rows, int N, double memcpy_Bps) {
  const int cores = std::min(N, coll::available_cores());
  auto traffic_s = [&](std::size_t bytes) {
    return 7.0 * (N - 1) * static_cast<double>(bytes) / (2.0 * cores * memcpy_Bps);
  };
  fmt::print(
      "\nmemory traffic: 7(N-1)/N x M bytes per rank, {} rank(s) on {} core(s) at {:.2f} GB/s "
      "memcpy each\n  (the 64 MiB copy speed: sizes that stay in cache beat it); MPI / traffic: "
      "the most any "
      "ring could gain over MPI_Allreduce where memory is the limit\n",
      N, cores, memcpy_Bps / 1e9);
  fmt::print("{:>10} {:>12} {:>12} {:>14} {:>13}\n", "size", "ring ms", "traffic ms",
             "ring / traffic", "MPI / traffic");
  for (std::size_t i = 0; i + 1 < rows.size(); i += 2) {
    if (rows[i].bytes < (1u << 20)) continue;
    const double t = traffic_s(rows[i].bytes);
    fmt::print("{:>10} {:>12.4f} {:>12.4f} {:>14.2f} {:>12.2f}x\n",
               human(static_cast<double>(rows[i].bytes)), rows[i].median_s * 1e3, t * 1e3,
               rows[i].median_s / t, rows[i + 1].median_s / t);
  }
}

// The wire-bytes table: per size, the ring's time and the bytes rank 0 sent in one call
// (all of them, within its host, to other hosts) with the rate they left at. The flat ring
// does not know where ranks sit: its split is "-".
void print_wire(const std::vector<Row>& rows, const coll::RingOptions& ring) {
  const bool split = ring.algorithm == coll::Algorithm::kHierarchical;
  fmt::print("\nwire bytes sent by rank 0 per call ({}):\n", wire_text(ring));
  fmt::print("{:>10} {:>11} {:>14} {:>14} {:>14} {:>12}\n", "size", "ring ms", "sent B",
             "intra-host B", "inter-host B", "sent GB/s");
  for (const Row& r : rows) {
    if (r.impl != "ring") continue;
    const coll::Counters& c = r.counters;
    fmt::print("{:>10} {:>11.4f} {:>14} {:>14} {:>14} {:>12.3f}\n",
               human(static_cast<double>(r.bytes)), r.median_s * 1e3, c.bytes_sent,
               split ? std::to_string(c.bytes_sent - c.inter_host_bytes_sent) : "-",
               split ? std::to_string(c.inter_host_bytes_sent) : "-",
               static_cast<double>(c.bytes_sent) / r.median_s / 1e9);
  }
}

nlohmann::json rows_json(const std::vector<Row>& rows, int N, const coll::RingOptions& ring) {
  const bool split = ring.algorithm == coll::Algorithm::kHierarchical;
  nlohmann::json json_rows = nlohmann::json::array();
  for (const Row& r : rows) {
    const double algbw = static_cast<double>(r.bytes) / r.median_s / 1e9;
    nlohmann::json row = {{"impl", r.impl},       {"world_size", N},
                          {"bytes", r.bytes},     {"median_s", r.median_s},
                          {"algbw_GBps", algbw},  {"busbw_GBps", algbw * bus_factor(N)},
                          {"repeats", r.repeats}, {"calls_per_sample", r.calls_per_sample},
                          {"wire", "fp32"},       {"rounds", nullptr},
                          {"bytes_sent_per_rank", nullptr}};
    if (r.impl == "ring") {
      const coll::Counters& c = r.counters;  // rank 0's (extra ranks of a host differ)
      row["wire"] = name_of(ring.wire);
      row["rounds"] = c.rounds;
      row["bytes_sent_per_rank"] = c.bytes_sent;  // on the wire: bf16 bytes where rounded
      row["inter_host_rounds"] = split ? nlohmann::json(c.inter_host_rounds) : nullptr;
      row["intra_host_bytes_sent_per_rank"] =
          split ? nlohmann::json(c.bytes_sent - c.inter_host_bytes_sent) : nullptr;
      row["inter_host_bytes_sent_per_rank"] =
          split ? nlohmann::json(c.inter_host_bytes_sent) : nullptr;
    }
    json_rows.push_back(row);
  }
  return json_rows;
}

nlohmann::json fit_json(const coll::CostFit& fit, const std::vector<coll::Sample>& samples) {
  auto bandwidth_json = [](double b) {
    return std::isfinite(b) ? nlohmann::json(b) : nlohmann::json(nullptr);
  };
  nlohmann::json json = {{"model", "t = 2(N-1)*alpha + 2(N-1)/N * bytes / bandwidth"},
                         {"alpha_s", fit.single.alpha_s},
                         {"bandwidth_Bps", bandwidth_json(fit.single.bandwidth_Bps)},
                         {"split", fit.split},
                         {"note", fit.note},
                         {"regimes", nlohmann::json::array()},
                         {"residuals", nlohmann::json::array()}};
  for (const coll::Regime& g : fit.regimes)
    json["regimes"].push_back({{"from_bytes", g.from_bytes},
                               {"to_bytes", g.to_bytes},
                               {"alpha_s", g.model.alpha_s},
                               {"bandwidth_Bps", bandwidth_json(g.model.bandwidth_Bps)}});
  for (std::size_t i = 0; i < samples.size() && i < fit.residuals.size(); ++i)
    json["residuals"].push_back({{"bytes", samples[i].bytes},
                                 {"measured_s", samples[i].seconds},
                                 {"predicted_s", fit.predicted_s[i]},
                                 {"residual", fit.residuals[i]}});
  return json;
}

// What the JSON file gets besides the rows and the fit.
struct RunFacts {
  std::pair<double, double> check_s;  // size check alone: ring, MPI_Allreduce
  double memcpy_Bps = 0;
};

void write_json(const coll::Communicator& comm, const Settings& settings, const Plan& plan,
                const RunFacts& facts, nlohmann::json rows, nlohmann::json fit) {
  nlohmann::json doc = {
      {"benchmark", "allreduce"},
      {"world_size", comm.size()},
      {"ranks_per_node", comm.ranks_per_node()},
      {"available_cores", coll::available_cores()},
      {"wait_policy", settings.wait},
      {"wait_policy_resolved", coll::to_string(plan.resolved)},
      {"segment_bytes", plan.ring.segment_bytes},
      {"segments_in_flight", plan.ring.segments_in_flight},
      {"size_check", plan.ring.check_sizes},
      {"size_check_s", {{"ring", facts.check_s.first}, {"mpi_allreduce", facts.check_s.second}}},
      {"memcpy_Bps", facts.memcpy_Bps},
      {"memcpy_bytes", plan.memcpy_bytes},
      {"huge_pages", !settings.small_pages},
      {"collective", settings.collective},
      {"ranks_per_host", settings.ranks_per_host},
      {"hosts", plan.ring.hierarchy ? plan.ring.hierarchy->layout().hosts : 0},
      {"wire", name_of(plan.ring.wire)},  // the ring's; MPI_Allreduce's rows say fp32
      {"rows", std::move(rows)},
      {"fit", std::move(fit)}};
  std::ofstream out(settings.json_path);
  if (!out) throw Error("cannot write " + settings.json_path);
  out << doc.dump(2) << '\n';
  if (!out) throw Error("failed writing " + settings.json_path);
  fmt::print("\nwrote {}\n", settings.json_path);
}

// The refusals of `ringtrain train` for the same flags: one UsageError, before any collective.
// MPI_Allreduce is always the comparison, so --collective mpi is refused; with --wire bf16 as
// training words it (bf16 is the ring's).
void check_choices(const Settings& settings) {
  const coll::Wire wire = parse_choice<coll::Wire>(settings.wire, "--wire");
  if (settings.collective == "mpi" && wire == coll::Wire::kBf16)
    throw UsageError(
        "--wire bf16 is done by the ring: it needs --collective ring or hierarchical (which "
        "rounds between hosts only)");
  if (settings.collective != "ring" && settings.collective != "hierarchical")
    throw UsageError("--collective " + settings.collective +
                     ": choose ring or hierarchical (MPI_Allreduce runs beside it always)");
}

int run_bench(const Settings& settings) {
  coll::Communicator comm;
  const int N = comm.size();
  const bool leader = comm.rank() == 0;
  check_choices(settings);
  if (settings.ranks_per_host < 0 ||
      (settings.ranks_per_host > 0 && settings.collective != "hierarchical"))
    throw UsageError("--ranks-per-host " + std::to_string(settings.ranks_per_host) +
                     ": needs --collective hierarchical and K >= 0 (0: MPI's hosts)");
  std::unique_ptr<coll::Hierarchy> hierarchy;  // outlives every call of the sweep
  if (settings.collective == "hierarchical")
    hierarchy = std::make_unique<coll::Hierarchy>(comm, settings.ranks_per_host);
  const Plan plan = make_plan(settings, comm, hierarchy.get());
  MemcpyReference reference(plan.memcpy_bytes, !settings.small_pages);
  RunFacts facts;
  facts.check_s = size_check_cost(comm, plan.resolved);
  if (leader) print_header(comm, settings, plan, facts.check_s);

  const std::vector<Row> rows = sweep(comm, settings, plan, reference);
  facts.memcpy_Bps = reference.bandwidth_Bps(comm);
  const std::vector<coll::Sample> samples = ring_samples(rows);
  const coll::CostFit fit = coll::fit_cost_model(samples, N);

  if (leader) {
    print_fit(fit, samples);
    print_summary(rows, N, facts.memcpy_Bps, plan.memcpy_bytes);
    if (!hierarchy && plan.ring.wire == coll::Wire::kFp32)
      print_traffic(rows, N, facts.memcpy_Bps);
    print_wire(rows, plan.ring);
  }
  if (leader && !settings.json_path.empty())
    write_json(comm, settings, plan, facts, rows_json(rows, N, plan.ring),
               fit_json(fit, samples));
  return 0;
}

}  // namespace

void add_bench_allreduce(CLI::App& bench, Runner& run) {
  auto settings = std::make_shared<Settings>();
  CLI::App* sub = bench.add_subcommand(
      "allreduce", "ring vs MPI_Allreduce size sweep, alpha-beta fit (run under mpiexec)");
  sub->add_option("--json", settings->json_path, "write the rows and the fit to this JSON file");
  sub->add_option("--sizes", settings->sizes,
                  "comma-separated sizes in bytes, e.g. 4,64K,1M (default 4 B .. 64 MiB, x2)")
      ->delimiter(',');
  sub->add_option("--warmup", settings->warmup, "untimed calls per size and implementation")
      ->capture_default_str();
  sub->add_option("--min-repeats", settings->min_repeats, "fewest timed samples per size")
      ->capture_default_str();
  sub->add_option("--max-repeats", settings->max_repeats, "most timed samples per size")
      ->capture_default_str();
  sub->add_option("--seconds-per-size", settings->seconds_per_size,
                  "time budget per size and implementation (sets the repeats)")
      ->capture_default_str();
  sub->add_option("--segment-bytes", settings->segment_bytes, "ring message size")
      ->capture_default_str();
  sub->add_option("--segments-in-flight", settings->segments_in_flight,
                  "ring receives posted ahead")
      ->capture_default_str();
  sub->add_option("--wait", settings->wait, "wait policy: auto, spin, yield or sleep")
      ->capture_default_str();
  sub->add_flag("--no-size-check", settings->no_size_check,
                "skip the ring's size-agreement check (measures the bare ring)");
  sub->add_flag("--small-pages", settings->small_pages,
                "plain std::vector buffers instead of huge-page backed ones");
  sub->add_option("--collective", settings->collective,
                  "what runs against MPI_Allreduce: ring, or hierarchical (two-level)")
      ->capture_default_str();
  sub->add_option("--ranks-per-host", settings->ranks_per_host,
                  "hierarchical: ranks [hK, (h+1)K) form host h (0: the hosts MPI reports)")
      ->capture_default_str();
  sub->add_option("--wire", settings->wire,
                  "the ring's messages as fp32, or bf16 (rounded to nearest even, added in "
                  "fp32; hierarchical: between hosts only); MPI_Allreduce stays fp32")
      ->capture_default_str();
  sub->callback([&run, settings] { run = [settings] { return run_bench(*settings); }; });
}

}  // namespace ringtrain::cli
