// BucketPlan: the model's gradient buckets, and which layer's backward completes which one.
// Pure: no MPI, no threads; fixed once the model is built.
//
// Where it sits in a step: backward runs the layers from the last to the first, and after
// each one the trainer calls GradientReducer::layer_done(layer). A bucket (a contiguous span
// of the flat gradient buffer, collectives/buckets.hpp) is *ready* once every gradient in it
// is written; its ring may start then, while backward computes the earlier layers.
//
// Vocabulary:
//   bucket b       buckets in backward order: bucket 0 ends at the end of the buffer
//   ready layer    the layer whose backward writes bucket b's last gradient, the layer of its
//                  first parameter (the one nearest the start of the buffer)
//   ready after L  buckets whose ready layer is >= L: all of them are written once backward
//                  has finished layer L; they are a prefix 0, 1, ..., k-1 of the buckets
//
// Worked example: an mlp with layers 0 (linear), 1 (relu), 2 (linear), parameters in buffer
// order w0 b0 (layer 0) w2 b2 (layer 2), and buckets {b2}, {w2}, {b0, w0}:
//   bucket   parameters   ready layer
//   0        b2           2
//   1        w2           2
//   2        w0 b0        0
//   ready_after(2) = 2 (buckets 0 and 1), ready_after(1) = 2 (relu writes nothing),
//   ready_after(0) = 3.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "ringtrain/collectives/buckets.hpp"
#include "ringtrain/framework/parameters.hpp"

namespace ringtrain {

class BucketPlan {
 public:
  // `parameters` in buffer order (ParameterStore::entries()), each with its layer; the
  // buckets hold at most cap_bytes each, unless a parameter is larger (it gets a bucket of
  // its own). Throws UsageError if cap_bytes is 0; a cap of 1 to 3 bytes counts as 4.
  BucketPlan(std::span<const ParameterEntry> parameters, std::size_t cap_bytes);

  const std::vector<collectives::Bucket>& buckets() const { return buckets_; }
  std::size_t size() const { return buckets_.size(); }
  std::size_t cap_bytes() const { return cap_bytes_; }

  // The layer whose backward writes bucket b's last gradient. Non-increasing in b.
  std::size_t ready_layer(std::size_t b) const { return ready_layer_[b]; }
  // How many buckets are ready once backward has finished layer `layer`: buckets
  // [0, ready_after(layer)) all have ready_layer(b) >= layer.
  std::size_t ready_after(std::size_t layer) const;

 private:
  std::size_t cap_bytes_;
  std::vector<collectives::Bucket> buckets_;
  std::vector<std::size_t> ready_layer_;
};

}  // namespace ringtrain
