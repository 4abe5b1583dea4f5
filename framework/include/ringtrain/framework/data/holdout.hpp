// A validation split held out of the training data (--validation-fraction F): which samples,
// and the two views of one stored split that train on the rest and validate on them.
//
// The choice is a pure function of (seed, n, F): a permutation of 0..n-1 by Fisher–Yates
// with draw i keyed (seed, kStreamHoldOut, i) (random.hpp), whose first round(F·n) entries
// are the validation samples; both parts keep the stored order. It does not depend on the
// number of ranks, and `ringtrain eval --split validation` draws the same samples from the
// run's seed and fraction.
//
// A view shares the stored samples (mapped or in memory: nothing is copied) and holds its
// own labels or targets; sample i of the view is stored sample rows[i] (dataset.hpp).
#pragma once

#include <cstdint>
#include <vector>

#include "ringtrain/framework/data/dataset.hpp"

namespace ringtrain::data {

struct HoldOut {
  std::vector<std::uint64_t> train;       // stored indices left for training, ascending
  std::vector<std::uint64_t> validation;  // the held-out ones, ascending
};

// The split of n samples. Throws UsageError unless 0 < F < 1 leaves at least one sample on
// each side (round(F·n) in [1, n - 1]), naming F and n.
HoldOut hold_out(std::uint64_t n, double fraction, std::uint64_t seed);

// The two views of a whole labelled split `stored` (moved in: its samples are shared by the
// views, floats in memory included, never copied).
struct Views {
  Dataset train, validation;
};
Views split_views(Dataset stored, const HoldOut& holdout);

}  // namespace ringtrain::data
