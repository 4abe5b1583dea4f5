// SGD update (see sgd.hpp for the rule). The loop is instantiated once per combination of
// (weight decay, momentum, nesterov), so each variant is a branch-free pass that the
// compiler vectorises: at -O3 one step over the 1.86 M-parameter mlp reads p, g, buf and
// writes p, buf once (≈ 37 MB of traffic), split over the rank's threads (optimizer.hpp).
#include "ringtrain/framework/optim/sgd.hpp"

#include <fmt/format.h>

namespace ringtrain {
namespace {

// p, g, buf: (n). buf is unused when !kMomentum.
template <bool kDecay, bool kMomentum, bool kNesterov>
void sgd_update(float* p, const float* grad, float* buf, std::size_t n, float lr, float mu,
                float wd) {
  for (std::size_t i = 0; i < n; ++i) {
    float g = grad[i];
    if constexpr (kDecay) g += wd * p[i];  // coupled decay
    float d = g;
    if constexpr (kMomentum) {
      const float b = mu * buf[i] + g;  // buf = μ·buf + g
      buf[i] = b;
      d = kNesterov ? g + mu * b : b;  // nesterov looks one step ahead
    }
    p[i] -= lr * d;
  }
}

}  // namespace

Sgd::Sgd(const OptimizerConfig& config, std::size_t num_elements)
    : Optimizer(num_elements),
      momentum_(config.momentum),
      nesterov_(config.nesterov),
      weight_decay_(config.weight_decay),
      momentum_buffer_(config.momentum > 0.0f ? num_elements : 0, 0.0f) {}

void Sgd::update(std::size_t offset, std::span<float> params, std::span<const float> grads,
                 float lr) {
  check_piece(offset, params, grads);
  float* const buf = momentum_buffer_.empty() ? nullptr : momentum_buffer_.data() + offset;
  const float mu = momentum_;
  const float wd = weight_decay_;
  const bool decay = wd != 0.0f;  // PyTorch skips the term entirely when wd = 0
  // The piece in parts over the rank's threads (optimizer.hpp), one kernel for all parts.
  auto update = [&](auto kernel) {
    for_each_range(params.size(), [&](std::size_t begin, std::size_t end) {
      kernel(params.data() + begin, grads.data() + begin, buf ? buf + begin : nullptr, end - begin,
             lr, mu, wd);
    });
  };
  if (mu == 0.0f) {
    if (decay)
      update(sgd_update<true, false, false>);
    else
      update(sgd_update<false, false, false>);
  } else if (nesterov_) {
    if (decay)
      update(sgd_update<true, true, true>);
    else
      update(sgd_update<false, true, true>);
  } else {
    if (decay)
      update(sgd_update<true, true, false>);
    else
      update(sgd_update<false, true, false>);
  }
}

std::vector<OptimizerStateView> Sgd::state() {
  if (momentum_ == 0.0f) return {};
  return {{"momentum", momentum_buffer_}};
}

std::string Sgd::describe() const {
  return fmt::format("sgd(momentum={}, nesterov={}, weight_decay={})", momentum_, nesterov_,
                     weight_decay_);
}

}  // namespace ringtrain
