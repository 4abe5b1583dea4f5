// `ringtrain bench allreduce`, the report: what rank 0 prints (the header, a line per size as
// it is measured, the summary the targets are stated in, the memory-traffic floor, the wire
// bytes) and the JSON file (--json: the run's facts, a row per size and implementation, the
// fit). Sizes, algbw and busbw are in fp32 payload bytes M whatever the wire carries:
// algbw = M/t, busbw = algbw·2(N-1)/N.
#include <fmt/core.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "bench_allreduce.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/train/modes.hpp"

namespace ringtrain::cli::allreduce_bench {

std::string human(double bytes) {
  if (bytes >= 1024.0 * 1024) return fmt::format("{:g} MiB", bytes / (1024.0 * 1024));
  if (bytes >= 1024) return fmt::format("{:g} KiB", bytes / 1024);
  return fmt::format("{:g} B", bytes);
}

namespace {

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

}  // namespace

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
    nlohmann::json row = {{"impl", r.impl},
                          {"world_size", N},
                          {"bytes", r.bytes},
                          {"median_s", r.median_s},
                          {"algbw_GBps", algbw},
                          {"busbw_GBps", algbw * bus_factor(N)},
                          {"repeats", r.repeats},
                          {"calls_per_sample", r.calls_per_sample},
                          {"wire", "fp32"},
                          {"rounds", nullptr},
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

}  // namespace ringtrain::cli::allreduce_bench
