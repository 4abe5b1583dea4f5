// The gradient buckets and their ready layers (see bucket_plan.hpp).
#include "train/sum/bucket_plan.hpp"

#include <algorithm>

#include "ringtrain/framework/error.hpp"

namespace ringtrain {

namespace {

std::vector<collectives::Bucket> plan(std::span<const ParameterEntry> parameters,
                                      std::size_t cap_bytes) {
  if (cap_bytes == 0) throw UsageError("--bucket-bytes 0: a bucket needs at least 4 bytes");
  std::vector<std::size_t> sizes;
  for (const ParameterEntry& e : parameters) sizes.push_back(e.size);
  return collectives::plan_buckets(sizes, std::max<std::size_t>(cap_bytes, sizeof(float)));
}

}  // namespace

BucketPlan::BucketPlan(std::span<const ParameterEntry> parameters, std::size_t cap_bytes)
    : cap_bytes_(cap_bytes), buckets_(plan(parameters, cap_bytes)) {
  for (const collectives::Bucket& b : buckets_)
    ready_layer_.push_back(parameters[b.first_parameter].layer);
}

std::size_t BucketPlan::ready_after(std::size_t layer) const {
  std::size_t ready = 0;
  while (ready < buckets_.size() && ready_layer_[ready] >= layer) ++ready;
  return ready;
}

}  // namespace ringtrain
