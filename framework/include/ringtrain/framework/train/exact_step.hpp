// The gradient of `--reduction exact`: bitwise the same for any number of ranks N >= 1 and any
// split of the global batch into local batches that are multiples of the micro-batch m.
//
// Why a float sum is not enough: float addition is not associative, so the ring's order, the
// split of the batch over ranks and the GEMM's blocking over the batch each change the last
// bits of Σ_i ∇ℓ_i; over many steps those bits grow.
//
// How this gradient avoids every one of them:
//   1. micro-batches   the global batch of B samples is cut at fixed positions into
//                      micro-batches of m (the last one of a short batch may be smaller).
//                      Every local batch is a multiple of m, so a rank holds whole
//                      micro-batches and micro-batch j is the same m samples on whichever
//                      rank holds it.
//   2. one call        forward and backward run once on the rank's whole local batch, with
//                      ctx.exact_micro_batch = m (data_parallel_step_exact.cpp). Results per
//                      sample (y, dx) do not depend on the other rows of the call; every sum
//                      over samples (dW, db, BatchNorm's statistics) is taken per micro-batch
//                      inside the layers, from that micro-batch's rows alone, and each
//                      micro-batch's dW and db go to this sum through sink(). The layers'
//                      rules ("Layers" below) keep both true, and the sums are already scaled
//                      by 1/B (the sum-scaled convention, reduction.hpp).
//   3. exact sums      each micro-batch's dW and db are kept (copies) in a GridSum
//                      (collectives/grid_sum.hpp), one block per parameter tensor. At the sum
//                      the ranks agree on each block's largest exponent and term count, which
//                      fix its grid; every term is rounded once onto it as an int64 word per
//                      element. Integer addition is associative, so neither the split over
//                      ranks nor the order matters.
//   4. one rounding    allreduce_grid reduce-scatters the words (8 bytes per element), each
//                      rank rounding its chunk of the totals to float32 once; the ring
//                      all-gathers the floats into every rank's gradient buffer (the same
//                      bits everywhere), and the optimizer (elementwise, independent of N)
//                      runs unchanged.
//   5. the loss       each micro-batch's loss sum (a double over its m samples, not scaled)
//                      is one term of a one-element ExactSum, summed over ranks the same way
//                      and rounded to float32 once: the logged loss has the same bits for any
//                      N and split. Rank 0 reports it as its share of the metrics window's sum
//                      and the other ranks report 0, so the window's sum over ranks is exact.
//   Nothing carries over between steps (clear() per step), so a run saved at N ranks resumes
//   bitwise at another N.
//   Trace (--trace-steps): on lane 0, "exact: forward, loss, backward" (the call), inside
//   it "exact: add to the accumulator" per term of a tensor (the copy and exponent scan),
//   then "exact: sum over ranks and round" (the agreement, the conversion, the words' sum),
//   "exact: loss over ranks" and "optimizer": bench/README-exact.md splits the step's cost
//   with them.
//
// Error bound, per element, against the exact sum S of the n = B/m partials (each partial a
// float32 computed as in 2.): |g − S| <= u·|S| + (1 + u)·n·X·2^(c−51), u = 2^-24,
// c = ceil(log2 n), X the largest |partial| of the element's tensor (grid_sum.hpp derives
// it); a float32 sum of the same partials in some order carries (n − 1)·u·Σ|x| instead.
// Memory: the kept terms, b_r/m floats per parameter on a rank with b_r samples; a run whose
// ranks would keep more than their node has available is refused before it starts
// (check_exact_memory).
//
// Layers. ReLU, Flatten, MaxPool2d and Dropout (masks keyed by global sample index) compute
// a sample's outputs from that sample alone.
//   Linear     dW, db per micro-batch of m rows (a product of k = m, then the rows' sum in
//              order). y = x·Wᵀ and dx = dy·W on all rows at once through
//              blas::gemm_row_stable where the CPU has the own kernels (AVX2 and FMA, or
//              AVX-512F): each element is summed over k in an order fixed by k alone, so a
//              row's bits depend neither on the call's other rows nor on the thread count
//              (ctx.exact_row_stable; whatever --gemm says). Elsewhere y and dx run per
//              micro-batch, each product of the shape a micro-batch alone would give it.
//   Conv2d     every product per micro-batch of m rows: a call of n rows splits into P =
//              min(4, n) parts of bounds p·n/P, sums the parts' dW and db in part order, and
//              runs Winograd's groups of 4 images from each part's start, all a function of
//              the micro-batch's rows alone (the part-to-thread assignment does not touch
//              the bits; the BLAS is on one thread). Winograd keeps no V in such a forward
//              (the next micro-batch would overwrite it): backward transforms each
//              micro-batch's inputs again (winograd::keep_inputs, the same bits).
// tests/framework/exact_chunks_test.cpp checks both against one call per micro-batch.
// The bits of a run depend on the CPU's kernels (AVX2 and AVX-512 give different ones), so
// runs compare bitwise on one kind of CPU. check_exact_layers refuses other layers.
//
// BatchNorm / SyncBN. No sample can be normalised before the statistics of all B samples
// (every micro-batch of every rank) are known, and no dx before Σdy, Σdy·x̂ of all of them;
// the one call (2.) lets the layer wait for them:
//   per micro-batch Σx, then Σ(x − μ)² (forward, two passes) and Σdy, Σdy·x̂ (backward), in
//   double, each one term of a small accumulator inside the layer, summed over ranks by
//   ctx.cross_rank->sum_exact (allreduce_exact: three small collectives per layer per step,
//   collective also on a rank with no rows) and rounded to double once; μ, σ², y, dx and the
//   running statistics follow from the totals, the same bits for any split. dγ, dβ are then
//   the global totals on every rank, so they take no terms here: their blocks stay empty and
//   sum_into puts the layer's values back after rounding the buffer (not summed twice).
// --sync-bn off (each rank normalising by its own rows) depends on the split by definition:
// refused with --reduction exact (options.cpp); at N = 1 the layer's sums are the batch's (no
// cross_rank).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/collectives/exact_sum.hpp"
#include "ringtrain/collectives/grid_sum.hpp"
#include "ringtrain/framework/layer.hpp"
#include "ringtrain/framework/parameters.hpp"
#include "ringtrain/framework/sequential.hpp"
#include "ringtrain/framework/train/trace.hpp"

namespace ringtrain {

// Micro-batch partials one step may add: the accumulator's term limit (B <= this · m).
inline constexpr std::size_t kExactMaxMicroBatches =
    static_cast<std::size_t>(collectives::GridSum::kMaxTerms);

// Throws UsageError naming the first layer the exact step does not support yet.
void check_exact_layers(const Sequential& model);

// Bytes a rank with `local_batch` samples keeps for one step's terms: a float per parameter
// element that takes terms (all but BatchNorm's) per micro-batch of m.
std::size_t exact_kept_bytes(const Sequential& model, std::size_t local_batch, std::size_t m);
// MemAvailable of /proc/meminfo in bytes; infinity where it cannot be read.
double available_memory_bytes();
// Refuses (UsageError, the same on every rank) a run whose ranks on one node would keep more
// for their terms than `available_bytes` (the node's available memory; the smallest over the
// ranks is taken), so that it stops with one line before anything is written instead of
// being killed mid-step. Collective.
void check_exact_memory(const collectives::Communicator& comm, const Sequential& model,
                        std::size_t largest_local_batch, std::size_t m, double available_bytes);

// One step's exact gradient sum over micro-batches and ranks. Terms come from the layers
// (sink(): one tensor's gradient view per micro-batch, into its block).
class ExactGradient {
 public:
  // One block per parameter tensor of `model`, in buffer order. BatchNorm's tensors are
  // totals over every rank after its exact backward (layers/batchnorm.hpp, "Exact"): their
  // blocks take no terms from the layers, and sum_into leaves them as the layer wrote them.
  // `trace` (may be null) receives spans of the adds, the sum over ranks and the rounding
  // on lane 0 while it is recording.
  explicit ExactGradient(const Sequential& model, Trace* trace = nullptr);
  ExactGradient(const ExactGradient&) = delete;
  ExactGradient& operator=(const ExactGradient&) = delete;

  // Starts a step: no terms.
  void clear() {
    sum_.clear();
    loss_.clear();
  }
  // Adds one micro-batch's loss sum (not scaled) as one term.
  void add_loss(double loss_sum) { loss_.add(std::span<const double>(&loss_sum, 1)); }
  // For ctx.exact_gradient (layer.hpp): add(view) adds a parameter tensor's gradient view
  // (a span of the model's gradient buffer, as bind() gave it) as one term of its block;
  // term(view) is the storage of the block's next term in the sum itself, and commit(view)
  // adds what was written there. Each throws Error for any other span.
  const ExactGradientSink& sink() const { return sink_; }
  // Marks the sum not finite (a non-finite loss or an injected fault): every rank skips.
  void poison();
  // gradient <- the sum over ranks of every rank's partials, rounded once (the same bits on
  // every rank), except BatchNorm's tensors, left as they are. Returns whether every element
  // is finite (then the same on every rank). Collective.
  // Also sums the losses over ranks: loss() is then the step's loss sum, the same bits on
  // every rank.
  bool sum_into(const collectives::Communicator& comm, std::span<float> gradient);
  double loss() const { return loss_total_; }

 private:
  // A span [begin_s, now) named `name` on lane 0, if the trace is recording this step.
  void span(std::size_t name, double begin_s) const;

  // The layers' sink: a view of the gradient buffer into its tensor's block.
  class Sink final : public ExactGradientSink {
   public:
    explicit Sink(ExactGradient& owner) : owner_(owner) {}
    void add(std::span<const float> gradient) const override;
    std::span<float> term(std::span<float> gradient) const override;
    void commit(std::span<float> gradient) const override;

   private:
    // The block of the tensor whose gradient view this is; Error for any other span.
    std::size_t block_of(std::span<const float> gradient) const;
    ExactGradient& owner_;
  };
  struct Range {  // elements [offset, offset + size) of the gradient buffer
    std::size_t offset, size;
  };

  collectives::GridSum sum_;
  collectives::ExactSum loss_{1};
  double loss_total_ = 0.0;
  Sink sink_{*this};
  const float* gradient_ = nullptr;  // the model's gradient buffer (the views' base)
  std::vector<Range> tensors_;       // every tensor, in buffer order: block b is tensors_[b]
  std::vector<Range> totals_;        // BatchNorm's tensors: left out of sum_into's rounding
  std::vector<float> saved_;         // their values while sum_into rounds the buffer
  Trace* trace_;                     // null: no spans
  std::size_t add_name_ = 0, sum_name_ = 0, loss_name_ = 0;
};

}  // namespace ringtrain
