// The split of the global batch by measured speed (batch_split.hpp): the checks of a request,
// the real shares s_r·T clamped to the bounds, their rounding to whole micro-batches, and the
// hysteresis. Shares are counted in units of m (U = B/m units) until the very end.
#include "train/step/batch_split.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "ringtrain/framework/error.hpp"

namespace ringtrain {
namespace {

bool known(double speed) {
  return std::isfinite(speed) && speed > 0.0;
}

// The bounds of every rank in units of m: lo_r = ceil(floor_r / m), hi_r = floor(cap / m).
struct UnitBounds {
  std::size_t units = 0;  // U = B / m
  std::vector<std::size_t> lo, hi;
};

void require(bool ok, const std::string& message) {
  if (!ok) throw UsageError("batch split: " + message);
}

UnitBounds checked_bounds(const SplitRequest& q) {
  const std::size_t n = q.floors.size();
  require(n > 0, "no ranks to split the global batch over");
  require(q.current.size() == n && q.speeds.size() == n,
          fmt::format("{} floors, {} current local batches and {} speeds: one of each per rank", n,
                      q.current.size(), q.speeds.size()));
  require(q.micro_batch > 0, "micro-batch 0: a micro-batch holds at least one sample");
  const std::size_t m = q.micro_batch;
  require(q.global_batch % m == 0,
          fmt::format("global batch {} is not a multiple of the micro-batch {}: no split into "
                      "whole micro-batches sums to it; choose a global batch that is",
                      q.global_batch, m));
  require(std::isfinite(q.comm_s) && q.comm_s >= 0.0,
          fmt::format("communication time {} s must be finite and >= 0", q.comm_s));
  require(q.margin >= 0.0 && q.margin < 1.0, fmt::format("margin {} must be in [0, 1)", q.margin));
  UnitBounds b;
  b.units = q.global_batch / m;
  for (std::size_t r = 0; r < n; ++r) {
    b.lo.push_back(q.floors[r] / m + (q.floors[r] % m != 0 ? 1 : 0));  // no overflow near 2^64
    b.hi.push_back(std::min(q.cap / m, b.units));
    require(b.lo[r] <= b.hi[r],
            fmt::format("rank {}'s floor {} is above the cap {} (in whole micro-batches of {}); "
                        "lower the floor or raise --max-local-batch",
                        r, q.floors[r], q.cap, m));
  }
  const std::size_t lo_sum = std::accumulate(b.lo.begin(), b.lo.end(), std::size_t{0});
  const std::size_t hi_sum = std::accumulate(b.hi.begin(), b.hi.end(), std::size_t{0});
  require(lo_sum <= b.units,
          fmt::format("the floors {} need {} samples, more than the global batch {}; lower "
                      "them or raise --global-batch",
                      q.floors, lo_sum * m, q.global_batch));
  require(hi_sum >= b.units,
          fmt::format("{} ranks capped at {} (whole micro-batches of {}: {} samples) cannot "
                      "hold the global batch {}; raise --max-local-batch",
                      n, q.cap, m, hi_sum * m, q.global_batch));
  return b;
}

// f(T) = Σ_r clamp(s_r·T, lo_r, hi_r), the units the shares at level T add up to.
double units_at(double level, const std::vector<double>& s, const UnitBounds& b) {
  double sum = 0.0;
  for (std::size_t r = 0; r < s.size(); ++r)
    sum += std::clamp(s[r] * level, double(b.lo[r]), double(b.hi[r]));
  return sum;
}

// Speeds relative to the fastest, none below kSlowest: every breakpoint below stays finite (at
// most 2^64 units / kSlowest), and a rank 10^12 times slower than the fastest gets its floor.
std::vector<double> relative_speeds(const std::vector<double>& speeds) {
  constexpr double kSlowest = 1e-12;
  const double fastest = *std::max_element(speeds.begin(), speeds.end());
  std::vector<double> s(speeds.size());
  for (std::size_t r = 0; r < s.size(); ++r) s[r] = std::max(speeds[r] / fastest, kSlowest);
  return s;
}

// The real shares x_r = clamp(s_r·T, lo_r, hi_r) with f(T) = U. f is continuous, does not
// decrease, and is linear between the breakpoints lo_r/s_r and hi_r/s_r; f(0) = Σ lo <= U
// <= Σ hi = f(last breakpoint). So: find by bisection the breakpoints a <= T <= b around U,
// and T on [a, b] by linear interpolation.
std::vector<double> real_shares(const std::vector<double>& s, const UnitBounds& b) {
  std::vector<double> breaks{0.0};
  for (std::size_t r = 0; r < s.size(); ++r) {
    breaks.push_back(double(b.lo[r]) / s[r]);
    breaks.push_back(double(b.hi[r]) / s[r]);
  }
  std::sort(breaks.begin(), breaks.end());
  const double target = double(b.units);
  // The first breakpoint at which f reaches U (the last one does).
  const auto above = std::partition_point(breaks.begin(), breaks.end(),
                                          [&](double t) { return units_at(t, s, b) < target; });
  double level = breaks.back();
  if (above == breaks.begin()) {
    level = 0.0;
  } else if (above != breaks.end()) {
    const double a = *(above - 1), fa = units_at(a, s, b);
    const double c = *above, fc = units_at(c, s, b);
    level = fc > fa ? a + (target - fa) * (c - a) / (fc - fa) : c;
  }
  std::vector<double> x(s.size());
  for (std::size_t r = 0; r < s.size(); ++r)
    x[r] = std::clamp(s[r] * level, double(b.lo[r]), double(b.hi[r]));
  return x;
}

// Whole units: each x_r rounded down, then the units left over one at a time to the rank whose
// time grows least, (q_r + 1)/s_r, among those below their cap (equal times: the lower rank).
// This gives the least max_r q_r/s_r of all splits within the bounds: moving a unit from a
// rank above ⌊x_j⌋ to one below ⌊x_r⌋ never lengthens the step (that rank's time stays within
// x_r/s_r, at most the real shares' step time, which no split beats), so some best split lies
// at or above ⌊x⌋, and from there each unit's greedy place is the best one. (A largest-remainder
// rounding is not: speeds 1 and 10, 6 units, shares 0.55 and 5.45; it gives 1,5, taking 1 s, where
// 0,6 takes 0.6 s.)
std::vector<std::size_t> rounded_units(const std::vector<double>& x, const std::vector<double>& s,
                                       const UnitBounds& b) {
  const std::size_t n = x.size();
  std::vector<std::size_t> q(n);
  for (std::size_t r = 0; r < n; ++r)
    q[r] = std::clamp(static_cast<std::size_t>(std::floor(x[r])), b.lo[r], b.hi[r]);
  // Σ ⌊x_r⌋ <= Σ x_r = U, and the loop ends, as Σ hi >= U.
  for (std::size_t total = std::accumulate(q.begin(), q.end(), std::size_t{0}); total < b.units;
       ++total) {
    std::size_t best = n;
    for (std::size_t r = 0; r < n; ++r)
      if (q[r] < b.hi[r] && (best == n || double(q[r] + 1) / s[r] < double(q[best] + 1) / s[best]))
        best = r;
    ++q[best];
  }
  return q;
}

// A split the bounds allow: it sums to B, and every b_r is whole micro-batches within bounds.
bool valid_split(const std::vector<std::size_t>& split, std::size_t m, const UnitBounds& b) {
  std::size_t units = 0;
  for (std::size_t r = 0; r < split.size(); ++r) {
    if (split[r] % m != 0 || split[r] / m < b.lo[r] || split[r] / m > b.hi[r]) return false;
    units += split[r] / m;
  }
  return units == b.units;
}

}  // namespace

std::vector<double> planned_speeds(const std::vector<double>& speeds) {
  double sum = 0.0;
  std::size_t count = 0;
  for (const double s : speeds)
    if (known(s)) sum += s, ++count;
  const double stand_in = count > 0 ? sum / double(count) : 1.0;
  std::vector<double> out(speeds.size());
  for (std::size_t r = 0; r < speeds.size(); ++r) out[r] = known(speeds[r]) ? speeds[r] : stand_in;
  return out;
}

double predicted_step_s(const std::vector<std::size_t>& split, const std::vector<double>& speeds,
                        double comm_s) {
  double slowest_s = 0.0;
  for (std::size_t r = 0; r < split.size(); ++r)
    if (split[r] > 0) slowest_s = std::max(slowest_s, double(split[r]) / speeds[r]);
  return slowest_s + comm_s;
}

SplitDecision decide_split(const SplitRequest& request) {
  const UnitBounds bounds = checked_bounds(request);
  SplitDecision d;
  d.planned_speeds = planned_speeds(request.speeds);
  const std::vector<double> relative = relative_speeds(d.planned_speeds);
  std::vector<std::size_t> proposal =
      rounded_units(real_shares(relative, bounds), relative, bounds);
  for (std::size_t& units : proposal) units *= request.micro_batch;
  d.proposed_step_s = predicted_step_s(proposal, d.planned_speeds, request.comm_s);
  const bool current_valid = valid_split(request.current, request.micro_batch, bounds);
  d.current_step_s = predicted_step_s(request.current, d.planned_speeds, request.comm_s);
  const bool better = d.proposed_step_s < (1.0 - request.margin) * d.current_step_s;
  d.changed = proposal != request.current && (!current_valid || better);
  d.split = d.changed ? proposal : request.current;
  return d;
}

}  // namespace ringtrain
