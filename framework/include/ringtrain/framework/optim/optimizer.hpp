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
// result of stepping one over the whole buffer, restricted to [a, b). For the same reason
// one step may be applied in pieces (begin_step, then update on each piece, in any order):
// the trainer updates a gradient bucket as soon as its reduction completes, while later
// buckets are still in flight, and the result is bitwise that of one step().
//
// Threads: the same property splits one update over the rank's threads. An optimizer built
// while the BLAS budget is T threads (blas::threads()) cuts each piece it updates
// into up to T contiguous parts (at least kMinPartElements each) and updates them on the
// rank's threads (blas::parallel_parts, the pool the layers use). Every element's update
// reads and writes only that element, so the result is bitwise the same for every thread
// count.
//
// Vocabulary: p params, g grad, lr learning rate (passed to every step, so a schedule
// lives outside), t the step count (1 on the first step), state = per-element buffers
// parallel to p (momentum, Adam moments) whose names are part of the checkpoint format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ringtrain/framework/blas.hpp"

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
  // Plans the parts of an update for the current BLAS thread budget (see "Threads" above).
  explicit Optimizer(std::size_t num_elements);
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of the range this optimizer owns, in a single fused pass, no allocation:
  // begin_step(), then update(0, params, grads, lr). params, grads: (num_elements()).
  // lr: the learning rate of this step (>= 0; the caller checks it). Throws UsageError if a
  // span has the wrong length.
  void step(std::span<float> params, std::span<const float> grads, float lr);

  // Counts the step about to be applied (so AdamW's bias correction sees t = 1 on the first
  // step) and returns t. Call once per step, before its update()s.
  std::uint64_t begin_step() { return ++step_count_; }
  // Applies the current step to elements [offset, offset + params.size()) of the owned
  // range; params and grads are those elements (the same length). Elementwise, so pieces
  // that together cover the range, updated in any order, give bitwise one step()'s result.
  // Throws UsageError if the spans differ in length or the piece leaves the range.
  virtual void update(std::size_t offset, std::span<float> params, std::span<const float> grads,
                      float lr) = 0;

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
  // Parts an update is split into at most (1: no thread pool), fixed at construction.
  std::size_t planned_parts() const { return planned_parts_; }

 protected:
  // Checks that the piece [offset, offset + params.size()) lies in the owned range and both
  // spans have its length; throws UsageError with the numbers.
  void check_piece(std::size_t offset, std::span<const float> params,
                   std::span<const float> grads) const;
  // Runs update(begin, end) over contiguous ranges that tile [0, n) of a piece, in parallel
  // on the planned threads (no more than the BLAS budget now); returns when all end.
  template <typename Update>
  void for_each_range(std::size_t n, Update&& update) {
    const std::size_t parts = parts_now(n);
    auto run_part = [&](std::size_t p) {
      update(range_begin(p, parts, n), range_begin(p + 1, parts, n));
    };
    blas::parallel_parts(parts, run_part);
  }

 private:
  // Smallest part worth a thread: starting a part on another thread costs some
  // microseconds, updating 64 Ki elements some tens.
  static constexpr std::size_t kMinPartElements = 64 * 1024;
  // Parts for a piece of n elements: planned, within the BLAS budget now, >= 64 Ki each.
  std::size_t parts_now(std::size_t n) const;
  // First element of part p of `parts` of [0, n): p·n/parts rounded down to 16 floats (a
  // cache line), so no two threads write the same line; range_begin(parts, parts, n) = n.
  static std::size_t range_begin(std::size_t p, std::size_t parts, std::size_t n);

  std::size_t num_elements_;
  std::uint64_t step_count_ = 0;
  std::size_t planned_parts_ = 1;
};

// Throws UsageError naming the field, its value and the allowed range, for an unknown name
// or an invalid value (momentum, betas outside [0, 1), eps <= 0, weight_decay < 0, NaNs,
// nesterov without momentum).
void validate(const OptimizerConfig& config);

// A validated optimizer owning zero-initialised state for `count` elements.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, std::size_t count);

}  // namespace ringtrain
