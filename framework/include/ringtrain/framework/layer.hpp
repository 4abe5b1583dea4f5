// Layer: the extension point of the framework. A layer differs from another only in its math.
//
// Life of a layer inside a Sequential model:
//   plan(input_shape, max_batch)  once: per-sample shapes known, workspace allocated
//   bind(views)                   once: views of its parameters, gradients and buffers inside
//                                 the model's flat buffers (see parameters.hpp)
//   forward(x, y, n, ctx)         every step, n <= max_batch rows, n may be 0
//   backward(x, y, dy, dx, n)     every step, after forward on the same x
//
// Conventions every layer keeps:
//   * x, y, dy, dx are row-major batches: (n, per-sample shape...).
//   * backward *overwrites* its parameter gradients (each parameter is used once per step),
//     so nothing needs zeroing between steps.
//   * dx may be empty: the caller does not need the input gradient (first layer); skip it.
//   * n = 0 is legal (a rank with no samples this step) and must still take part in any
//     cross-rank reduction the layer does (SyncBatchNorm), so collectives stay matched.
//   * No allocation in forward or backward.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/tensor.hpp"

namespace ringtrain::collectives {
class ExactSum;  // collectives/exact_sum.hpp
}

namespace ringtrain {

// How a parameter (or buffer) is filled before training.
enum class Init {
  kZeros,
  kOnes,
  kUniformFanIn,  // U(-1/sqrt(fan_in), +1/sqrt(fan_in)): PyTorch's default for Linear/Conv
};

// A named tensor a layer asks the model to store for it. The name is local to the layer
// ("weight", "bias", "running_mean"); the model prefixes it with the layer's path.
struct ParamSpec {
  std::string name;
  Shape shape;
  Init init = Init::kZeros;
  std::size_t fan_in = 0;  // for kUniformFanIn
};

// Sums a few per-channel statistics over all ranks (SyncBatchNorm). Collective: every rank
// calls it the same number of times with the same size, also ranks with n = 0.
// sum_exact: the same for an exact accumulator (--reduction exact): afterwards every rank
// holds the total of every rank's terms (collectives::allreduce_exact), whatever the split.
class CrossRankSum {
 public:
  virtual ~CrossRankSum() = default;
  virtual void sum(std::span<double> values) const = 0;
  virtual void sum_exact(collectives::ExactSum& sum) const {
    (void)sum;
    throw Error("this cross-rank sum has no exact form (--reduction exact needs one)");
  }
};

// Where a layer puts its parameter gradients per micro-batch with --reduction exact
// (train/exact_step.hpp). `gradient` is always one of the layer's gradient views from bind():
// its place in the model's gradient buffer names the tensor.
//   bound(gradients, bounds)  first, in every exact backward call of a layer with terms, on
//                     every rank (a rank without rows passes 0): bounds[i] >= |x| for every
//                     element x of every term the call gives gradients[i]. A sink may agree
//                     on the bounds over ranks (collective) and round each term onto a grid
//                     they fix as it comes (exact_step.hpp, "Bounds");
//   add(gradient)     adds the view's current contents as one term of that tensor's block of
//                     the step's exact sum;
//   add_pieces(gradient, offset, length, pieces, first_term)  elements [offset, offset +
//                     length) of this call's terms first_term, first_term + 1, ... (0, 1, ...:
//                     the call's micro-batches in order), `pieces` holding each term's piece
//                     of `length` floats in turn; every term covers the whole tensor, each
//                     element's piece of term 0 first. It lets a layer hand over its terms in
//                     pieces while they are in cache, instead of each whole term at once.
class ExactGradientSink {
 public:
  virtual ~ExactGradientSink() = default;
  virtual void bound(std::span<const std::span<float>> gradients,
                     std::span<const double> bounds) const {
    (void)gradients;
    (void)bounds;
  }
  virtual void add(std::span<const float> gradient) const = 0;
  virtual void add_pieces(std::span<float> gradient, std::size_t offset, std::size_t length,
                          std::span<const float> pieces, std::size_t first_term) const = 0;
};

// What a layer may need to know about the step besides its input.
struct StepContext {
  bool training = true;
  std::uint64_t seed = 0;
  std::size_t layer_index = 0;                // set by Sequential: keys per-layer randomness
  std::span<const std::uint64_t> sample_ids;  // global dataset index of each row (dropout)
  const CrossRankSum* cross_rank = nullptr;   // null: batch statistics of this rank only
  // --reduction exact (train/exact_step.hpp): > 0 makes a layer whose result depends on the
  // batch (BatchNorm) sum its statistics per micro-batch of this many rows, aligned to the
  // rank's first row, in exact accumulators (cross_rank->sum_exact). 0: the float/double path.
  std::size_t exact_micro_batch = 0;
  // With exact_micro_batch: layers whose parameter gradient is a sum over rows (Linear,
  // Conv2d) compute it per micro-batch and hand each micro-batch's gradient to this sink,
  // which then holds the call's gradient (the layer's views do not: at most the last
  // micro-batch's, or nothing of this call where the layer wrote into the sink's terms).
  const ExactGradientSink* exact_gradient = nullptr;
  // With exact_micro_batch: true runs Linear's products whose rows are samples (y = x·Wᵀ,
  // dx = dy·W) once on all n rows, on blas::gemm_row_stable (a row's bits do not depend on
  // the call's other rows); false runs them per micro-batch, as every product is (the path
  // for CPUs without the own kernels).
  bool exact_row_stable = false;
  // Called by a layer between pieces of long work in backward (a convolution between
  // samples, a linear layer between its two products) so that gradient rings in flight
  // advance (gradient_reducer.hpp). Null: nobody listens. It never touches the layer's data;
  // call it from the calling thread only.
  const std::function<void()>* poll = nullptr;
};

inline void poll_communication(const StepContext& ctx) {
  if (ctx.poll) (*ctx.poll)();
}

// Views a layer receives into the model's flat buffers, one per spec, in spec order.
struct LayerBinding {
  std::vector<std::span<float>> params;
  std::vector<std::span<float>> grads;
  std::vector<std::span<float>> buffers;
};

class Layer {
 public:
  virtual ~Layer() = default;

  // Short lowercase name used in parameter paths: "linear", "conv2d", "batchnorm", ...
  virtual std::string kind() const = 0;

  // Given the per-sample input shape, allocate workspace for up to max_batch rows and
  // return the per-sample output shape. Throws UsageError if the input shape does not fit.
  virtual Shape plan(const Shape& input, std::size_t max_batch) = 0;

  virtual std::vector<ParamSpec> parameter_specs() const { return {}; }
  // Non-trained state that is part of the model (BatchNorm running statistics).
  virtual std::vector<ParamSpec> buffer_specs() const { return {}; }
  virtual void bind(const LayerBinding& binding) { (void)binding; }

  // x: (n, in...) -> y: (n, out...)
  virtual void forward(std::span<const float> x, std::span<float> y, std::size_t n,
                       const StepContext& ctx) = 0;

  // dy: (n, out...) -> dx: (n, in...) (or empty), and this layer's parameter gradients.
  virtual void backward(std::span<const float> x, std::span<const float> y,
                        std::span<const float> dy, std::span<float> dx, std::size_t n,
                        const StepContext& ctx) = 0;

  // Multiply-adds x 2 of one sample's forward pass (for the sgemm-limit benchmark).
  virtual double forward_flops_per_sample() const { return 0.0; }
};

}  // namespace ringtrain
