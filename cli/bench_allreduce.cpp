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
//
// The parts: the sweep (bench_allreduce_sweep.cpp), the fit (bench_allreduce_fit.cpp), the
// report (bench_allreduce_report.cpp); bench_allreduce.hpp holds what they share. Here: the
// flags, the plan they resolve to, and the run.
#include "bench_allreduce.hpp"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/train/modes.hpp"

namespace ringtrain::cli {

namespace allreduce_bench {

namespace {

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
    if (!hierarchy && plan.ring.wire == coll::Wire::kFp32) print_traffic(rows, N, facts.memcpy_Bps);
    print_wire(rows, plan.ring);
  }
  if (leader && !settings.json_path.empty())
    write_json(comm, settings, plan, facts, rows_json(rows, N, plan.ring), fit_json(fit, samples));
  return 0;
}

}  // namespace

}  // namespace allreduce_bench

void add_bench_allreduce(CLI::App& bench, Runner& run) {
  auto settings = std::make_shared<allreduce_bench::Settings>();
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
  sub->callback(
      [&run, settings] { run = [settings] { return allreduce_bench::run_bench(*settings); }; });
}

}  // namespace ringtrain::cli
