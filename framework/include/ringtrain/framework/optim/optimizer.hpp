// Optimizer: the last stage of a training step. After the ring has summed the gradients,
// every rank applies the same elementwise update to a contiguous range of the flat
// parameter buffer (ParameterStore::values()):
//
//   whole buffer          [0, M)               plain data parallelism
//   one rank's shard      [begin, begin+count) ZeRO-1: each rank updates and keeps state
//                                              only for its shard, then all-gathers params
//
// Because every rule here is elementwise, an optimizer built for `count` elements knows
// nothing about where its range lies: stepping it on [a, b) of a buffer gives exactly the
// result of stepping one over the whole buffer, restricted to [a, b).
//
// Vocabulary: p params, g grad, lr learning rate (passed to every step, so a schedule
// lives outside), t the step count (1 on the first step), state = per-element buffers
// parallel to p (momentum, Adam moments) whose names are part of the checkpoint format.
//
// Threads: the same property splits one step over the rank's threads. An optimizer built
// while the BLAS budget is T threads (blas::threads(), DESIGN §4) cuts its range into up
// to T contiguous parts (at least kMinPartElements each) and updates them on a pool planned
// at construction. Every element's update reads and writes only that element, so the
// result is bitwise the same for every thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ringtrain/framework/thread_pool.hpp"

namespace ringtrain {

struct OptimizerConfig {
  std::string name = "sgd";  // "sgd" | "adamw"
  // sgd
  float momentum = 0.9f;  // in [0, 1); 0 means plain SGD (no state)
  bool nesterov = false;  // requires momentum > 0
  // both: sgd couples it into the gradient (g += wd·p), adamw decouples it (p *= 1 − lr·wd)
  float weight_decay = 0.0f;  // >= 0
  // adamw
  float beta1 = 0.9f;    // in [0, 1)
  float beta2 = 0.999f;  // in [0, 1)
  float eps = 1e-8f;     // > 0
};

// One per-element state buffer, borrowed from the optimizer: `values` has the optimizer's
// element count and is parallel to its parameter range. Writing into it (checkpoint
// restore) changes the optimizer's state. Names are stable: "momentum" (sgd),
// "exp_avg" and "exp_avg_sq" (adamw).
struct OptimizerStateView {
  std::string name;
  std::span<float> values;
};

class Optimizer {
 public:
  // Plans the parts of a step for the current BLAS thread budget (see "Threads" above).
  explicit Optimizer(std::size_t num_elements);
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of the range this optimizer owns, in a single fused pass, no allocation.
  // params, grads: (num_elements()). lr: the learning rate of this step (>= 0; the caller
  // checks it). Increments step_count() first, so AdamW's bias correction sees t = 1 on
  // the first step. Throws UsageError if a span has the wrong length.
  virtual void step(std::span<float> params, std::span<const float> grads, float lr) = 0;

  // The per-element state, for checkpoints (see OptimizerStateView). Empty for
  // momentum-free SGD. Views stay valid for the optimizer's lifetime.
  virtual std::vector<OptimizerStateView> state() = 0;

  // Steps taken so far (0 before the first); restored from a checkpoint with the state.
  virtual std::uint64_t step_count() const { return step_count_; }
  virtual void set_step_count(std::uint64_t steps) { step_count_ = steps; }

  // One line for logs and the run manifest, e.g.
  // "sgd(momentum=0.9, nesterov=false, weight_decay=0)".
  virtual std::string describe() const = 0;

  // Number of parameters in the owned range (= length of every state buffer).
  std::size_t num_elements() const { return num_elements_; }
  // Parts a step is split into at most (1: no thread pool), fixed at construction.
  std::size_t planned_parts() const { return planned_parts_; }

 protected:
  // Checks both spans have num_elements() elements; throws UsageError with the lengths.
  void check_extent(std::span<const float> params, std::span<const float> grads) const;
  // Counts the step about to be applied and returns its number t (1 on the first step).
  std::uint64_t advance_step_count() { return ++step_count_; }
  // Runs update(begin, end) over contiguous ranges that tile [0, num_elements()), in
  // parallel on the planned threads (no more than the BLAS budget now); returns when all end.
  template <typename Update>
  void for_each_range(Update&& update) {
    const std::size_t parts = parts_now();
    auto run_part = [&](std::size_t p) {
      update(range_begin(p, parts), range_begin(p + 1, parts));
    };
    if (parts <= 1)
      run_part(0);
    else
      pool_->run(parts, run_part);
  }

 private:
  // Smallest part worth a thread: waking a worker costs some microseconds, updating
  // 64 Ki elements some tens.
  static constexpr std::size_t kMinPartElements = 64 * 1024;
  std::size_t parts_now() const;
  // First element of part p of `parts`: p·n/parts rounded down to 16 floats (a cache line),
  // so no two threads write the same line; range_begin(parts, parts) = n.
  std::size_t range_begin(std::size_t p, std::size_t parts) const;

  std::size_t num_elements_;
  std::uint64_t step_count_ = 0;
  std::size_t planned_parts_ = 1;
  std::unique_ptr<ThreadPool> pool_;  // null when one part was planned
};

// Throws UsageError naming the field, its value and the allowed range, for an unknown name
// or an invalid value (momentum, betas outside [0, 1), eps <= 0, weight_decay < 0, NaNs,
// nesterov without momentum).
void validate(const OptimizerConfig& config);

// A validated optimizer owning zero-initialised state for `count` elements.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, std::size_t count);

}  // namespace ringtrain
