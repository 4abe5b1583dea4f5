// Trace recording and trace.json (see trace.hpp).
#include "train/trace.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "ringtrain/collectives/clock.hpp"
#include "ringtrain/collectives/small.hpp"
#include "ringtrain/framework/atomic_file.hpp"
#include "train/now.hpp"

namespace ringtrain {

namespace {
// Saves and other rare events recorded outside the traced steps, at most this many.
constexpr std::size_t kMaxRareEvents = 1000;
}  // namespace

Trace::Trace(std::uint64_t max_steps, std::size_t events_per_step, double origin_s, double offset_s,
             double uncertainty_s)
    : max_steps_(max_steps),
      origin_s_(origin_s),
      offset_s_(offset_s),
      uncertainty_s_(uncertainty_s) {
  events_.reserve(static_cast<std::size_t>(max_steps) * events_per_step + kMaxRareEvents);
}

std::size_t Trace::name(const std::string& text) {
  for (std::size_t i = 0; i < names_.size(); ++i)
    if (names_[i] == text) return i;
  names_.push_back(text);
  return names_.size() - 1;
}

void Trace::begin_step(std::uint64_t step) {
  step_ = step;
  recording_ = traced_steps_ < max_steps_;
  if (recording_) ++traced_steps_;
}

void Trace::span(std::size_t name, int lane, double begin_s, double end_s, double bytes,
                 bool always) {
  if (!(recording_ || always) || events_.size() == events_.capacity()) return;
  events_.push_back(Event{static_cast<std::uint32_t>(name), lane, step_, begin_s, end_s, bytes});
}

std::string Trace::events_json(int rank, const std::vector<std::string>& lanes) const {
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", rank},
                    {"args",
                     {{"name", "rank " + std::to_string(rank)},
                      {"clock_offset_us", offset_s_ * 1e6},
                      {"clock_uncertainty_us", uncertainty_s_ * 1e6}}}});
  events.push_back({{"name", "process_sort_index"},
                    {"ph", "M"},
                    {"pid", rank},
                    {"args", {{"sort_index", rank}}}});
  for (std::size_t lane = 0; lane < lanes.size(); ++lane)
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", rank},
                      {"tid", lane},
                      {"args", {{"name", lanes[lane]}}}});
  // ts on rank 0's clock, µs since rank 0's start: t - offset - origin.
  auto micros = [&](double t) { return (t - offset_s_ - origin_s_) * 1e6; };
  for (const Event& e : events_) {
    nlohmann::json args = {{"step", e.step}};
    if (e.bytes >= 0) args["bytes"] = e.bytes;
    events.push_back({{"name", names_[e.name]},
                      {"ph", "X"},
                      {"pid", rank},
                      {"tid", e.lane},
                      {"ts", micros(e.begin_s)},
                      {"dur", (e.end_s - e.begin_s) * 1e6},
                      {"args", args}});
  }
  return events.dump();
}

void write_trace(const collectives::Communicator& comm, const Trace& trace,
                 const std::vector<std::string>& lanes, const std::filesystem::path& path) {
  const std::vector<std::string> all =
      collectives::gather_text(comm, trace.events_json(comm.rank(), lanes), 0);
  if (comm.rank() != 0) return;
  nlohmann::json file = {
      {"displayTimeUnit", "ms"},
      {"otherData",
       {{"ranks", comm.size()},
        {"clock",
         "ts: microseconds since rank 0's start on rank 0's steady clock; each rank "
         "subtracts its offset to rank 0, measured by ping-pong at start-up "
         "(process metadata: clock_offset_us +- clock_uncertainty_us)"}}}};
  nlohmann::json& events = file["traceEvents"] = nlohmann::json::array();
  for (const std::string& text : all)
    for (auto& e : nlohmann::json::parse(text)) events.push_back(std::move(e));
  write_file_atomically(path, file.dump() + "\n");
}

std::unique_ptr<Trace> make_run_trace(const collectives::Communicator& comm,
                                      std::uint64_t max_steps, std::size_t events_per_step) {
  const collectives::ClockOffset clock = collectives::measure_clock_offset(comm, now_s);
  double origin[1] = {comm.rank() == 0 ? now_s() : 0.0};  // rank 0's start, on rank 0's clock
  if (comm.size() > 1) collectives::allreduce_sum(comm, std::span<double>(origin));
  return std::make_unique<Trace>(max_steps, events_per_step, origin[0], clock.offset_s,
                                 clock.uncertainty_s);
}

std::vector<std::string> trace_lanes(std::span<const collectives::Bucket> buckets) {
  std::vector<std::string> lanes = {"compute", "agree"};
  for (std::size_t b = 0; b < buckets.size(); ++b)
    lanes.push_back(fmt::format("bucket {} ({} floats)", b, buckets[b].elements));
  return lanes;
}

}  // namespace ringtrain
