// `ringtrain bench allreduce`: what its parts share. The run (bench_allreduce.cpp) resolves the
// flags (Settings) into a Plan, times every size (the sweep, bench_allreduce_sweep.cpp: a pair
// of Rows per size, ring then MPI_Allreduce), fits the α-β model to the ring's rows
// (bench_allreduce_fit.cpp) and reports (bench_allreduce_report.cpp: the printed tables, the
// JSON file). Internal to the executable: nothing here is installed.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ringtrain/collectives/buffer.hpp"
#include "ringtrain/collectives/collectives.hpp"
#include "ringtrain/collectives/cost_model.hpp"

namespace ringtrain::cli::allreduce_bench {

namespace coll = ringtrain::collectives;

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
  bool small_pages = false;         // plain std::vector buffers instead of huge pages
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

// What a run measures, resolved from the settings: the sizes, both implementations'
// options, and the size of the memcpy reference.
struct Plan {
  std::vector<std::size_t> sizes;
  coll::RingOptions ring;  // the hand-written ring (or the hierarchical one), as the flags ask
  coll::RingOptions mpi;   // plain MPI_Allreduce
  coll::WaitPolicy resolved = coll::WaitPolicy::kSpin;  // ring.wait for this machine
  std::size_t largest = 0;                              // bytes of the largest size
  std::size_t memcpy_bytes = 0;  // the memcpy reference: 64 MiB or the largest size
};

// What the JSON file gets besides the rows and the fit.
struct RunFacts {
  std::pair<double, double> check_s;  // size check alone: ring, MPI_Allreduce
  double memcpy_Bps = 0;
};

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

// The memcpy reference: single-core copies of memcpy_bytes on rank 0, timed between the
// ring and MPI calls of the largest size so that all three see the same machine.
class MemcpyReference {
 public:
  MemcpyReference(std::size_t bytes, bool huge_pages);
  // Collective: one timed copy (rank 0 copies, the others sleep in a barrier).
  void sample(const coll::Communicator& comm);
  // Collective: the median copy's bytes per second (rank 0 measured it), on every rank.
  double bandwidth_Bps(const coll::Communicator& comm) const;
  std::size_t bytes() const { return bytes_; }

 private:
  std::size_t bytes_;
  Buffer from_, to_;
  std::vector<double> seconds_;
};

double median(std::vector<double> v);

// The sweep (bench_allreduce_sweep.cpp); both collective.
// Median seconds of the size-agreement check alone: the ring's, and MPI_Allreduce's of (min, max).
std::pair<double, double> size_check_cost(const coll::Communicator& comm, coll::WaitPolicy wait);
// Every size in turn; rows come in pairs (ring, mpi) per size. Rank 0 prints each size's
// line as soon as it is measured.
std::vector<Row> sweep(const coll::Communicator& comm, const Settings& settings, const Plan& plan,
                       MemcpyReference& reference);

// The fit (bench_allreduce_fit.cpp).
std::vector<coll::Sample> ring_samples(const std::vector<Row>& rows);
void print_fit(const coll::CostFit& fit, const std::vector<coll::Sample>& samples);
nlohmann::json fit_json(const coll::CostFit& fit, const std::vector<coll::Sample>& samples);

// The report (bench_allreduce_report.cpp); rank 0 alone calls these.
std::string human(double bytes);
void print_header(const coll::Communicator& comm, const Settings& settings, const Plan& plan,
                  std::pair<double, double> check_s);
void print_size(const Row& r, const Row& m, int N);
void print_summary(const std::vector<Row>& rows, int N, double memcpy_Bps,
                   std::size_t memcpy_bytes);
void print_traffic(const std::vector<Row>& rows, int N, double memcpy_Bps);
void print_wire(const std::vector<Row>& rows, const coll::RingOptions& ring);
nlohmann::json rows_json(const std::vector<Row>& rows, int N, const coll::RingOptions& ring);
void write_json(const coll::Communicator& comm, const Settings& settings, const Plan& plan,
                const RunFacts& facts, nlohmann::json rows, nlohmann::json fit);

}  // namespace ringtrain::cli::allreduce_bench
