// ParameterStore: every parameter of a model in one flat contiguous buffer, and every
// gradient in another of the same layout, with a named view per parameter.
//
//   values: [ layers.0.linear/weight | layers.0.linear/bias | layers.2.linear/weight | ... ]
//   grads:  [          same offsets, same sizes                                          ]
//
// Because the layout is one span, a gradient bucket is a sub-span, the ring reduces the
// whole buffer in one call, and an optimizer (or a ZeRO shard of it) updates a range.
// Names are stable hierarchical paths: they are the checkpoint format.
//
// Both buffers sit on transparent huge pages (collectives/buffer.hpp): the ring hands the
// gradients, and with ZeRO-1 the parameters, to the kernel's cross-memory copy, which pins
// every page of a message (mlp: 1,820 pages of 4 KiB, or 4 of 2 MiB); its effect:
// bench/README-allreduce.md, "Huge pages".
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "ringtrain/collectives/buffer.hpp"
#include "ringtrain/framework/layer.hpp"
#include "ringtrain/framework/tensor.hpp"

namespace ringtrain {

struct ParameterEntry {
  std::string name;  // "layers.0.linear/weight"
  Shape shape;
  std::size_t offset = 0;  // in elements, into values() and grads()
  std::size_t size = 0;
  std::size_t layer = 0;  // index of the owning layer
  Init init = Init::kZeros;
  std::size_t fan_in = 0;
};

class ParameterStore {
 public:
  // with_grads = false for non-trained buffers (BatchNorm running statistics).
  explicit ParameterStore(bool with_grads = true) : with_grads_(with_grads) {}

  // Appends an entry; only valid before finalize().
  void add(std::string name, const ParamSpec& spec, std::size_t layer);
  // Allocates the flat buffers (zero-filled). Views taken before this call are invalid.
  void finalize();

  std::size_t count() const { return entries_.size(); }
  std::size_t num_elements() const { return values_.size(); }
  const std::vector<ParameterEntry>& entries() const { return entries_; }
  const ParameterEntry& entry(std::size_t i) const { return entries_.at(i); }
  // Index of the entry with this name; throws Error if there is none.
  std::size_t index_of(const std::string& name) const;

  std::span<float> values() { return values_.span(); }
  std::span<const float> values() const { return values_.span(); }
  std::span<float> grads() { return grads_.span(); }
  std::span<const float> grads() const { return grads_.span(); }
  std::span<float> value(std::size_t i) {
    return values().subspan(entries_[i].offset, entries_[i].size);
  }
  std::span<float> grad(std::size_t i) {
    return grads().subspan(entries_[i].offset, entries_[i].size);
  }

  // Fills every entry by its Init rule from a counter-based stream keyed by (seed, entry).
  void initialize(std::uint64_t seed);

 private:
  bool with_grads_;
  bool finalized_ = false;
  std::vector<ParameterEntry> entries_;
  collectives::HugePageBuffer values_;
  collectives::HugePageBuffer grads_;
};

}  // namespace ringtrain
