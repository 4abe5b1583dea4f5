// The validation hold-out (holdout.hpp): the draw, and views of a stored split.
#include "ringtrain/framework/data/holdout.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/random.hpp"

namespace ringtrain::data {

HoldOut hold_out(std::uint64_t n, double fraction, std::uint64_t seed) {
  const double held = std::round(fraction * double(n));
  if (!(fraction > 0.0 && fraction < 1.0) || held < 1.0 || held > double(n) - 1.0)
    throw UsageError(fmt::format(
        "--validation-fraction {}: of {} training samples it holds out {}; it must leave at "
        "least one sample for validation and one for training",
        fraction, n, held));
  if (n >= std::uint64_t{1} << 32)
    throw UsageError(fmt::format("--validation-fraction: {} samples, at most 2^32 - 1", n));
  std::vector<std::uint64_t> order(n);
  std::iota(order.begin(), order.end(), std::uint64_t{0});
  // Fisher–Yates from the back, draw i keyed (seed, kStreamHoldOut, i): the same on every rank.
  for (std::uint64_t i = n; i-- > 1;) {
    const std::uint64_t bits = random::hash({seed, random::kStreamHoldOut, i});
    std::swap(order[i], order[random::below(bits, i + 1)]);
  }
  const auto m = static_cast<std::ptrdiff_t>(held);
  HoldOut out{{order.begin() + m, order.end()}, {order.begin(), order.begin() + m}};
  std::sort(out.train.begin(), out.train.end());
  std::sort(out.validation.begin(), out.validation.end());
  return out;
}

namespace {

// The view of `stored`'s samples `rows`; stored's samples are already shared (mapped).
Dataset subset(const Dataset& stored, const std::vector<std::uint64_t>& rows) {
  Dataset view;
  view.sample_shape = stored.sample_shape;
  view.num_classes = stored.num_classes;
  view.num_targets = stored.num_targets;
  view.mapped = stored.mapped;
  view.x_xxh3 = stored.x_xxh3;
  view.y_xxh3 = stored.y_xxh3;
  view.rows = std::make_shared<const std::vector<std::uint64_t>>(rows);
  const std::size_t k = stored.num_targets;
  for (std::uint64_t r : rows) {
    if (r >= stored.size())
      throw Error(fmt::format("subset: row {} of a split of {} samples", r, stored.size()));
    if (stored.regression())
      view.targets.insert(view.targets.end(), stored.targets.begin() + std::ptrdiff_t(r * k),
                          stored.targets.begin() + std::ptrdiff_t((r + 1) * k));
    else
      view.labels.push_back(stored.labels[r]);
  }
  return view;
}

}  // namespace

Views split_views(Dataset stored, const HoldOut& holdout) {
  if (stored.rows || !stored.labelled())
    throw Error("split_views: the data must be a whole labelled split, not a view");
  if (!stored.mapped.present()) {  // floats in memory: shared by both views from now on
    auto floats = std::make_shared<const Tensor>(std::move(stored.images));
    stored.mapped = {.file = nullptr,
                     .held = nullptr,
                     .floats = floats,
                     .first = reinterpret_cast<const std::uint8_t*>(floats->data()),
                     .dtype = DType::kFloat32};
    stored.images = Tensor();
  }
  return {subset(stored, holdout.train), subset(stored, holdout.validation)};
}

}  // namespace ringtrain::data
