// The optimizer factory and the checks shared by every optimizer's steps (span extents);
// the configuration's own checks are in optimizer_config.cpp.
#include "ringtrain/framework/optim/optimizer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "ringtrain/framework/blas.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/optim/adamw.hpp"
#include "ringtrain/framework/optim/sgd.hpp"

namespace ringtrain {
Optimizer::Optimizer(std::size_t num_elements) : num_elements_(num_elements) {
  const std::size_t threads = std::size_t(std::max(1, blas::threads()));
  planned_parts_ = std::max<std::size_t>(1, std::min(threads, num_elements / kMinPartElements));
}

Optimizer::~Optimizer() = default;

std::size_t Optimizer::parts_now(std::size_t n) const {
  const std::size_t budget = blas::parallel_threads();
  return std::max<std::size_t>(1, std::min({planned_parts_, budget, n / kMinPartElements}));
}

std::size_t Optimizer::range_begin(std::size_t p, std::size_t parts, std::size_t n) {
  if (p >= parts) return n;
  constexpr std::size_t kLine = 16;  // floats per 64-byte cache line
  return p * n / parts / kLine * kLine;
}

void Optimizer::step(std::span<float> params, std::span<const float> grads, float lr) {
  if (params.size() != num_elements_ || grads.size() != num_elements_)
    throw UsageError(fmt::format(
        "optimizer step on {} params and {} grads, but it owns {} elements; pass the same "
        "range it was built for",
        params.size(), grads.size(), num_elements_));
  begin_step();
  update(0, params, grads, lr);
}

void Optimizer::check_piece(std::size_t offset, std::span<const float> params,
                            std::span<const float> grads) const {
  if (params.size() != grads.size() || offset > num_elements_ ||
      params.size() > num_elements_ - offset)
    throw UsageError(fmt::format(
        "optimizer update of {} params and {} grads at offset {}, but it owns {} elements; "
        "pass a piece of the range it was built for",
        params.size(), grads.size(), offset, num_elements_));
  if (step_count_ == 0)
    throw UsageError("optimizer update before begin_step(): count the step first");
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, std::size_t count) {
  validate(config);
  if (config.name == "sgd") return std::make_unique<Sgd>(config, count);
  return std::make_unique<AdamW>(config, count);
}

}  // namespace ringtrain
