// `ringtrain bench allreduce`: the hand-written ring against MPI_Allreduce, size by size, in
// the same run, and the α-β model fitted to the ring's times.
//
// For each size (4 B .. 64 MiB by default): warm-up calls of both, then `repeats` samples in
// which the ring and MPI_Allreduce alternate (which goes first alternates too). A sample is a
// barrier and then a batch of back-to-back calls (doubled until it lasts 10 ms), timed
// on every rank; its time per call is the slowest rank's batch time over the batch length,
// and a size's time is the median over samples. (Batches, as in nccl-tests and OSU: with 4
// ranks on 2 cores a single call after a barrier mostly measures how late the scheduler lets
// the last rank out of the barrier, ~0.3 ms, not the call.) Prints time, algbw = M/t, busbw = algbw·2(N-1)/N,
// the ratio ring/MPI, and the model's prediction with its residual; also the single-core
// memcpy bandwidth on 64 MiB (rank 0 alone, the others asleep) as the ceiling to compare
// busbw with, and what the size-agreement check costs. Only rank 0 prints.
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

namespace ringtrain::cli {

namespace {

namespace coll = ringtrain::collectives;

constexpr double kBatchSeconds = 10e-3;  // a timed sample lasts at least this long
constexpr int kMaxBatch = 1024;         // ... or has this many calls

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
  if (unit == "K" || unit == "KiB") scale = 1024;
  else if (unit == "M" || unit == "MiB") scale = 1024 * 1024;
  else if (unit == "G" || unit == "GiB") scale = std::size_t{1} << 30;
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

int run_bench(const Settings& settings) {
  coll::Communicator comm;
  const int N = comm.size();
  const bool leader = comm.rank() == 0;

  std::vector<std::size_t> sizes;
  for (const std::string& s : settings.sizes) sizes.push_back(parse_size(s));
  if (sizes.empty())
    for (std::size_t b = 4; b <= 64u * 1024 * 1024; b *= 2) sizes.push_back(b);
  if (settings.min_repeats < 1 || settings.max_repeats < settings.min_repeats)
    throw UsageError("--repeats: need 1 <= min <= max");

  coll::RingOptions ring;
  ring.segment_bytes = settings.segment_bytes;
  ring.segments_in_flight = settings.segments_in_flight;
  try {
    ring.wait = coll::parse_wait_policy(settings.wait);
  } catch (const coll::CollectiveError& e) {
    throw UsageError(std::string("--wait: ") + e.what());
  }
  ring.check_sizes = !settings.no_size_check;
  coll::RingOptions mpi;
  mpi.algorithm = coll::Algorithm::kMpi;
  mpi.check_sizes = false;  // plain MPI_Allreduce
  const coll::WaitPolicy resolved = coll::resolve_wait_policy(ring.wait, comm);

  const std::size_t largest = *std::max_element(sizes.begin(), sizes.end());
  // The memcpy reference: 64 MiB (or the largest size), timed between the ring and MPI calls
  // of the largest size so that all three see the same machine.
  const std::size_t memcpy_bytes = std::max<std::size_t>(largest, 64u << 20);
  Buffer copy_from(memcpy_bytes / sizeof(float), !settings.small_pages);
  Buffer copy_to(memcpy_bytes / sizeof(float), !settings.small_pages);
  std::fill(copy_from.span().begin(), copy_from.span().end(), 1.0f);
  std::vector<double> memcpy_s;
  const auto [check_ring_s, check_mpi_s] = size_check_cost(comm, resolved);

  if (leader) {
    fmt::print("allreduce: ring vs MPI_Allreduce, N = {} ({} per node, {} cores), wait {} "
               "(resolved: {}), segment {}, {} in flight, size check {}\n",
               N, comm.ranks_per_node(), coll::available_cores(), settings.wait,
               coll::to_string(resolved), human(static_cast<double>(ring.segment_bytes)),
               ring.segments_in_flight, ring.check_sizes ? "on" : "off");
    fmt::print("buffers: {}; size check alone: ring {:.1f} us, MPI_Allreduce {:.1f} us\n\n",
               settings.small_pages ? "std::vector (4 KiB pages)" : "huge pages (buffer.hpp)",
               check_ring_s * 1e6, check_mpi_s * 1e6);
    fmt::print("{:>10} {:>11} {:>11} {:>9} {:>11} {:>11} {:>11}\n", "size", "ring ms",
               "MPI ms", "ring/MPI", "ring algbw", "ring busbw", "MPI busbw");
  }

  coll::RingTransfer transfer;  // planned once, reused for every call
  Buffer data(largest / sizeof(float), !settings.small_pages);
  std::vector<Row> rows;
  const double bus_factor = N > 1 ? 2.0 * (N - 1) / N : 0.0;

  for (std::size_t bytes : sizes) {
    std::span<float> buffer = data.span().first(bytes / sizeof(float));
    std::fill(buffer.begin(), buffer.end(), 1.0f);
    coll::Counters counters;
    auto one_call = [&](bool use_ring) {
      if (use_ring)
        counters = coll::run_collective(transfer, comm, buffer, coll::Collective::kAllreduce, ring);
      else
        coll::run_collective(transfer, comm, buffer, coll::Collective::kAllreduce, mpi);
    };
    // Seconds per call of a batch of `calls` back-to-back calls, on this rank. One untimed
    // call first: after the other implementation's calls (MPICH's spinning leaves the
    // scheduler's accounting lopsided at N > cores) the first call can take a millisecond
    // that belongs to neither; a training loop calling one collective repeatedly never sees it.
    auto batch = [&](bool use_ring, int calls) {
      coll::barrier(comm, resolved);
      one_call(use_ring);
      const double t0 = MPI_Wtime();
      for (int k = 0; k < calls; ++k) one_call(use_ring);
      return (MPI_Wtime() - t0) / calls;
    };
    // Warm-up, then batch lengths: doubled until a batch lasts kBatchSeconds on the slowest
    // rank (the first call after a barrier is slow when ranks share cores, so one call is a
    // poor estimate), then the number of samples that fits the time budget.
    for (int i = 0; i < settings.warmup; ++i) {
      batch(true, 1);
      batch(false, 1);
    }
    auto calibrate = [&](bool use_ring, double& per_call) {
      for (int calls = 1;; calls *= 2) {
        per_call = batch(use_ring, calls);
        coll::allreduce_max(comm, std::span<double>(&per_call, 1));
        if (per_call * calls >= kBatchSeconds || calls >= kMaxBatch) return calls;
      }
    };
    double ring_call_s = 0, mpi_call_s = 0;
    const int ring_calls = calibrate(true, ring_call_s);
    const int mpi_calls = calibrate(false, mpi_call_s);
    const double sample_s = std::max(ring_calls * ring_call_s, mpi_calls * mpi_call_s);
    const int repeats = std::clamp(static_cast<int>(settings.seconds_per_size / sample_s),
                                   settings.min_repeats, settings.max_repeats);
    std::vector<double> ring_s(static_cast<std::size_t>(repeats)), mpi_s(ring_s.size());
    for (std::size_t i = 0; i < ring_s.size(); ++i) {
      if (i % 2 == 0) {
        ring_s[i] = batch(true, ring_calls);
        mpi_s[i] = batch(false, mpi_calls);
      } else {
        mpi_s[i] = batch(false, mpi_calls);
        ring_s[i] = batch(true, ring_calls);
      }
      if (bytes == largest) memcpy_s.push_back(time_memcpy(comm, copy_from.span(), copy_to.span()));
    }
    max_over_ranks(comm, ring_s);
    max_over_ranks(comm, mpi_s);
    const Row r{"ring", bytes, median(ring_s), repeats, ring_calls, counters};
    const Row m{"mpi", bytes, median(mpi_s), repeats, mpi_calls, {}};
    rows.push_back(r);
    rows.push_back(m);
    if (leader) {
      const double algbw = static_cast<double>(bytes) / r.median_s / 1e9;
      const double mpi_algbw = static_cast<double>(bytes) / m.median_s / 1e9;
      fmt::print("{:>10} {:>11.4f} {:>11.4f} {:>9.3f} {:>11.3f} {:>11.3f} {:>11.3f}\n",
                 human(static_cast<double>(bytes)), r.median_s * 1e3, m.median_s * 1e3,
                 r.median_s / m.median_s, algbw, algbw * bus_factor, mpi_algbw * bus_factor);
      std::fflush(stdout);
    }
  }

  // memcpy median (rank 0 measured it; others hold zeros).
  double memcpy_Bps = comm.rank() == 0 ? static_cast<double>(memcpy_bytes) / median(memcpy_s) : 0;
  coll::allreduce_max(comm, std::span<double>(&memcpy_Bps, 1));

  // The α-β model, fitted to the ring's medians.
  std::vector<coll::Sample> samples;
  for (const Row& r : rows)
    if (r.impl == "ring") samples.push_back({static_cast<double>(r.bytes), r.median_s});
  const coll::CostFit fit = coll::fit_cost_model(samples, N);

  nlohmann::json json_rows = nlohmann::json::array();
  for (const Row& r : rows) {
    const double algbw = static_cast<double>(r.bytes) / r.median_s / 1e9;
    nlohmann::json row = {{"impl", r.impl},          {"world_size", N},
                          {"bytes", r.bytes},        {"median_s", r.median_s},
                          {"algbw_GBps", algbw},     {"busbw_GBps", algbw * bus_factor},
                          {"repeats", r.repeats},    {"calls_per_sample", r.calls_per_sample},
                          {"rounds", nullptr},
                          {"bytes_sent_per_rank", nullptr}};
    if (r.impl == "ring") {
      row["rounds"] = r.counters.rounds;
      row["bytes_sent_per_rank"] = r.counters.bytes_sent;  // rank 0's; the same on every rank
    }                                                     // when N divides M
    json_rows.push_back(row);
  }
  auto bandwidth_json = [](double b) { return std::isfinite(b) ? nlohmann::json(b) : nlohmann::json(nullptr); };
  nlohmann::json fit_json = {{"model", "t = 2(N-1)*alpha + 2(N-1)/N * bytes / bandwidth"},
                             {"alpha_s", fit.single.alpha_s},
                             {"bandwidth_Bps", bandwidth_json(fit.single.bandwidth_Bps)},
                             {"split", fit.split},
                             {"note", fit.note},
                             {"regimes", nlohmann::json::array()},
                             {"residuals", nlohmann::json::array()}};
  for (const coll::Regime& g : fit.regimes)
    fit_json["regimes"].push_back({{"from_bytes", g.from_bytes}, {"to_bytes", g.to_bytes},
                                   {"alpha_s", g.model.alpha_s},
                                   {"bandwidth_Bps", bandwidth_json(g.model.bandwidth_Bps)}});
  for (std::size_t i = 0; i < samples.size() && i < fit.residuals.size(); ++i)
    fit_json["residuals"].push_back({{"bytes", samples[i].bytes},
                                     {"measured_s", samples[i].seconds},
                                     {"predicted_s", fit.predicted_s[i]},
                                     {"residual", fit.residuals[i]}});

  if (leader) {
    fmt::print("\nalpha-beta model t = 2(N-1)a + 2(N-1)/N M/B, fitted to the ring "
               "(least squares on relative error):\n  {}\n", fit.note);
    if (!fit.residuals.empty()) {
      fmt::print("{:>10} {:>12} {:>12} {:>9}\n", "size", "measured ms", "model ms", "residual");
      for (std::size_t i = 0; i < samples.size(); ++i)
        fmt::print("{:>10} {:>12.4f} {:>12.4f} {:>8.1f}%\n", human(samples[i].bytes),
                   samples[i].seconds * 1e3, fit.predicted_s[i] * 1e3, 100 * fit.residuals[i]);
    }
    // The figures the targets are stated in.
    std::vector<double> big_ratios;
    for (std::size_t i = 0; i + 1 < rows.size(); i += 2)
      if (rows[i].bytes >= (1u << 20)) big_ratios.push_back(rows[i].median_s / rows[i + 1].median_s);
    double worst_speedup = 1e300;
    for (std::size_t i = 0; i + 1 < rows.size(); i += 2)
      worst_speedup = std::min(worst_speedup, rows[i + 1].median_s / rows[i].median_s);
    fmt::print("\nsummary: ring/MPI median over sizes >= 1 MiB: {}; smallest MPI/ring speed-up "
               "over all sizes: {:.2f}x\n",
               big_ratios.empty() ? std::string("-") : fmt::format("{:.3f}", median(big_ratios)),
               worst_speedup);
    const Row& last = rows[rows.size() - 2];
    const double busbw = static_cast<double>(last.bytes) / last.median_s * bus_factor;
    fmt::print("         busbw at {}: {:.2f} GB/s = {:.0f}% of single-core memcpy of {} "
               "({:.2f} GB/s, same run)\n",
               human(static_cast<double>(last.bytes)), busbw / 1e9, 100 * busbw / memcpy_Bps,
               human(static_cast<double>(memcpy_bytes)), memcpy_Bps / 1e9);

    // Memory traffic, the floor under any ring built on MPI messages once the data no longer
    // fits in cache (smaller sizes run faster than this estimate). With one copy per
    // message, a rank moves 7(N-1)/N · M bytes through memory: in each of the N-1
    // reduce-scatter rounds 2·M/N to copy the received chunk (read + write) and 3·M/N to add
    // it into place (read both, write one); in each all-gather round 2·M/N to copy. N ranks
    // do this at once on min(N, cores) cores, each core moving 2 × memcpy bytes per second.
    // At N = 2 that is 1.75 × the traffic of a copy (busbw at most 57 % of memcpy).
    const int cores = std::min(N, coll::available_cores());
    auto traffic_s = [&](std::size_t bytes) {
      return 7.0 * (N - 1) * static_cast<double>(bytes) / (2.0 * cores * memcpy_Bps);
    };
    fmt::print("\nmemory traffic: 7(N-1)/N x M bytes per rank, {} rank(s) on {} core(s) at {:.2f} GB/s "
               "memcpy each\n  (the 64 MiB copy speed: sizes that stay in cache beat it); MPI / traffic: the most any "
               "ring could gain over MPI_Allreduce where memory is the limit\n",
               N, cores, memcpy_Bps / 1e9);
    fmt::print("{:>10} {:>12} {:>12} {:>14} {:>13}\n", "size", "ring ms", "traffic ms",
               "ring / traffic", "MPI / traffic");
    for (std::size_t i = 0; i + 1 < rows.size(); i += 2) {
      if (rows[i].bytes < (1u << 20)) continue;
      const double t = traffic_s(rows[i].bytes);
      fmt::print("{:>10} {:>12.4f} {:>12.4f} {:>14.2f} {:>12.2f}x\n", human(static_cast<double>(rows[i].bytes)),
                 rows[i].median_s * 1e3, t * 1e3, rows[i].median_s / t, rows[i + 1].median_s / t);
    }
  }

  if (leader && !settings.json_path.empty()) {
    nlohmann::json doc = {
        {"benchmark", "allreduce"},
        {"world_size", N},
        {"ranks_per_node", comm.ranks_per_node()},
        {"available_cores", coll::available_cores()},
        {"wait_policy", settings.wait},
        {"wait_policy_resolved", coll::to_string(resolved)},
        {"segment_bytes", ring.segment_bytes},
        {"segments_in_flight", ring.segments_in_flight},
        {"size_check", ring.check_sizes},
        {"size_check_s", {{"ring", check_ring_s}, {"mpi_allreduce", check_mpi_s}}},
        {"memcpy_Bps", memcpy_Bps},
        {"memcpy_bytes", memcpy_bytes},
        {"huge_pages", !settings.small_pages},
        {"rows", json_rows},
        {"fit", fit_json}};
    std::ofstream out(settings.json_path);
    if (!out) throw Error("cannot write " + settings.json_path);
    out << doc.dump(2) << '\n';
    if (!out) throw Error("failed writing " + settings.json_path);
    fmt::print("\nwrote {}\n", settings.json_path);
  }
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
  sub->callback([&run, settings] { run = [settings] { return run_bench(*settings); }; });
}

}  // namespace ringtrain::cli
