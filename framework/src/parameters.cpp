// The flat parameter and gradient buffers, and their initialisation.
#include "ringtrain/framework/parameters.hpp"

#include <algorithm>
#include <cmath>

#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/random.hpp"

namespace ringtrain {

void ParameterStore::add(std::string name, const ParamSpec& spec, std::size_t layer) {
  if (finalized_) throw Error("ParameterStore::add(" + name + ") after finalize()");
  ParameterEntry e;
  e.name = std::move(name);
  e.shape = spec.shape;
  e.offset = entries_.empty() ? 0 : entries_.back().offset + entries_.back().size;
  e.size = ringtrain::num_elements(spec.shape);
  e.layer = layer;
  e.init = spec.init;
  e.fan_in = spec.fan_in;
  entries_.push_back(std::move(e));
}

void ParameterStore::finalize() {
  const std::size_t total = entries_.empty() ? 0 : entries_.back().offset + entries_.back().size;
  values_ = collectives::HugePageBuffer(total);  // zero-filled
  grads_ = collectives::HugePageBuffer(with_grads_ ? total : 0);
  finalized_ = true;
}

std::size_t ParameterStore::index_of(const std::string& name) const {
  for (std::size_t i = 0; i < entries_.size(); ++i)
    if (entries_[i].name == name) return i;
  throw Error("no parameter named '" + name + "'");
}

void ParameterStore::initialize(std::uint64_t seed) {
  for (std::size_t p = 0; p < entries_.size(); ++p) {
    const ParameterEntry& e = entries_[p];
    std::span<float> v = value(p);
    switch (e.init) {
      case Init::kZeros:
        std::fill(v.begin(), v.end(), 0.0f);
        break;
      case Init::kOnes:
        std::fill(v.begin(), v.end(), 1.0f);
        break;
      case Init::kUniformFanIn: {
        // U(-bound, bound), bound = 1/sqrt(fan_in)
        const float bound = 1.0f / std::sqrt(static_cast<float>(e.fan_in));
        for (std::size_t j = 0; j < v.size(); ++j) {
          const float u = random::uniform01(random::hash({seed, random::kStreamInit, p, j}));
          v[j] = (2.0f * u - 1.0f) * bound;
        }
        break;
      }
    }
  }
}

}  // namespace ringtrain
