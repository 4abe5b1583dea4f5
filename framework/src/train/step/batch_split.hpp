// The split of the global batch by measured speed: which local batch b_r each rank computes
// so that the slowest rank finishes as early as possible. A pure function of numbers every
// rank holds (after one small allreduce of the speeds), so every rank computes the same split.
//
// Vocabulary:
//   B        the global batch; the split b_0 + ... + b_{N-1} = B always
//   m        the micro-batch (--exact-micro-batch in exact mode, else 1): every b_r is a
//            multiple of m, so the exact update does not change with the split
//   floor_r  the least b_r rank r may get (0 where the layers accept an empty rank)
//   cap      the most any rank may get (--max-local-batch: its buffers are planned for it)
//   s_r      rank r's compute speed, samples/s of forward + backward (no communication, no
//            waiting), smoothed over a window (speed_smoother.hpp)
//   comm_s   the step's communication time, the same for every split
//
// Model of one step: t(b) = max_r (b_r / s_r) + comm_s.
//
// The proposal. Shares proportional to speed, within the bounds: b_r = clamp(s_r·T, lo_r, hi_r)
// with the one T that makes them sum to B (this minimises max_r b_r/s_r over real shares). In
// units of m, each share is rounded down, and the units left over go one at a time to the rank
// whose time grows least, (b_r + m)/s_r; equal times go to the lower rank. The result has the
// least predicted time of all splits within the bounds. Example, B = 4, m = 1, speeds 1 and 3:
// shares 1 and 3, t = max(1/1, 3/3) = 1 s where the even split 2,2 takes 2 s.
//
// Hysteresis: the proposal replaces the current split only when its predicted step time is
// shorter by more than `margin` (a fraction of the current one), so measurement noise does not
// make the split flap. A current split that is not valid under the bounds is always replaced.
#pragma once

#include <cstddef>
#include <vector>

namespace ringtrain {

// The fraction by which a new split must shorten the predicted step time to be taken.
inline constexpr double kSplitMargin = 0.05;

struct SplitRequest {
  std::size_t global_batch = 0;      // B
  std::size_t micro_batch = 1;       // m (1 when not exact)
  std::vector<std::size_t> floors;   // per rank, the least b_r (N entries)
  std::size_t cap = 0;               // the most any b_r may be (--max-local-batch)
  std::vector<std::size_t> current;  // the split in force (N entries)
  std::vector<double> speeds;        // s_r, samples/s; 0, negative or non-finite: unknown
  double comm_s = 0.0;               // communication per step, seconds (>= 0)
  double margin = kSplitMargin;      // hysteresis, in [0, 1)
};

struct SplitDecision {
  std::vector<std::size_t> split;      // the split to use from now on (the current one if kept)
  bool changed = false;                // split != current
  double current_step_s = 0.0;         // t(current) under the speeds used for the decision
  double proposed_step_s = 0.0;        // t(proposal); the proposal is `split` when changed
  std::vector<double> planned_speeds;  // the speeds used: unknown ones replaced (see below)
};

// The speeds the plan uses: an unknown speed (0, negative, NaN, infinite: a rank that had no
// samples in the window has none) becomes the mean of the known ones, so that rank gets work
// and is measured again instead of being starved for ever; with no known speed, all are 1
// (the proportional split is then the near-equal one).
std::vector<double> planned_speeds(const std::vector<double>& speeds);

// t(b) = max_r (b_r / s_r) + comm_s, seconds; a rank with b_r = 0 adds nothing. speeds > 0.
double predicted_step_s(const std::vector<std::size_t>& split, const std::vector<double>& speeds,
                        double comm_s);

// The split for the next window (see the top of this file). Throws UsageError, with the
// values and a hint, when no split can satisfy the request: sizes that are not N, N = 0,
// B not a multiple of m, a floor above the cap, floors summing above B, caps summing below B,
// comm_s negative, margin outside [0, 1).
SplitDecision decide_split(const SplitRequest& request);

}  // namespace ringtrain
