// Trace: what each rank did when, on one timeline, written as trace.json in the Chrome trace
// event format (open it in https://ui.perfetto.dev or chrome://tracing).
//
//   pid  = rank
//   tid  = lane: 0 "compute" (data, forward and backward per layer, optimizer, waits,
//          checkpoint saves), 1 "agree" (the small collective that decides whether the step
//          is applied), 2 + k "bucket k" (bucket k's ring, from its start to its observed
//          completion, with its bytes)
//   ts   = microseconds since rank 0's start, on rank 0's clock: each rank subtracts its clock
//          offset to rank 0, measured at start-up (collectives/clock.hpp)
//
// Only the first `max_steps` steps are recorded (--trace-steps), plus checkpoint saves; the
// event storage is reserved up front so that recording allocates nothing. Names are interned
// once (name()) and events refer to them by number.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ringtrain/collectives/buckets.hpp"
#include "ringtrain/collectives/communicator.hpp"

namespace ringtrain {

class Trace {
 public:
  // origin_s: rank 0's start, in rank 0's clock; offset_s: this rank's clock minus rank 0's,
  // known to +- uncertainty_s (both go into the file). events_per_step: how many span()
  // calls a step makes at most (for the reservation).
  Trace(std::uint64_t max_steps, std::size_t events_per_step, double origin_s, double offset_s,
        double uncertainty_s);

  // Interns a name ("backward layers.2.linear"); returns its number. Setup time only.
  std::size_t name(const std::string& text);
  // Marks the start of a step: recording() is true for the first max_steps steps.
  void begin_step(std::uint64_t step);
  bool recording() const { return recording_; }

  // A span [begin_s, end_s) of this rank's clock on `lane`, if recording (or `always`, for
  // rare events such as checkpoint saves). bytes < 0: none.
  void span(std::size_t name, int lane, double begin_s, double end_s, double bytes = -1.0,
            bool always = false);

  // This rank's events as a JSON array (Chrome trace events, pid = rank), with the lane
  // names as metadata events. `lanes` names lanes 0, 1, 2, ...
  std::string events_json(int rank, const std::vector<std::string>& lanes) const;
  std::size_t size() const { return events_.size(); }

 private:
  struct Event {
    std::uint32_t name;
    std::int32_t lane;
    std::uint64_t step;
    double begin_s, end_s, bytes;
  };
  std::uint64_t max_steps_;
  std::uint64_t step_ = 0;
  std::uint64_t traced_steps_ = 0;
  bool recording_ = false;
  double origin_s_, offset_s_, uncertainty_s_;
  std::vector<std::string> names_;
  std::vector<Event> events_;
};

// A run's trace: every rank's clock aligned to rank 0's (collectives/clock.hpp), its origin
// rank 0's start, recording the first max_steps steps of events_per_step spans each.
// Collective.
std::unique_ptr<Trace> make_run_trace(const collectives::Communicator& comm,
                                      std::uint64_t max_steps, std::size_t events_per_step);

// The lanes of a run's trace, in tid order: "compute", "agree", then "bucket b (E floats)"
// for each gradient bucket.
std::vector<std::string> trace_lanes(std::span<const collectives::Bucket> buckets);

// Collective: every rank's events travel to rank 0, which writes `path` atomically (temp file
// + rename).
void write_trace(const collectives::Communicator& comm, const Trace& trace,
                 const std::vector<std::string>& lanes, const std::filesystem::path& path);

}  // namespace ringtrain
