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
//                      ctx.exact_micro_batch = m (ExactGradientSum::prepare). Results per
//                      sample (y, dx) do not depend on the other rows of the call; every sum
//                      over samples (dW, db, BatchNorm's statistics) is taken per micro-batch
//                      inside the layers, from that micro-batch's rows alone, and each
//                      micro-batch's dW and db go to this sum through sink(). The layers'
//                      rules ("Layers" below) keep both true, and the sums are already scaled
//                      by 1/B (the sum-scaled convention, reduction.hpp).
//   3. exact sums      a GridSum (collectives/grid_sum.hpp), one block per parameter tensor.
//                      Before a layer's first term the ranks agree on a bound of its terms
//                      ("Bounds" below), which fixes the grid of its tensors' blocks; every
//                      term is then rounded once onto the grid as the layer hands it over,
//                      into an int64 word per element, and not kept. Integer addition is
//                      associative, so neither the split over ranks nor the order matters.
//   4. one rounding    allreduce_grid reduce-scatters the words (8 bytes per element), each
//                      rank rounding its chunk of the totals to float32 once; the ring
//                      all-gathers the floats into every rank's gradient buffer (the same
//                      bits everywhere), and the optimizer (elementwise, independent of N)
//                      runs unchanged. With --overlap on (the default) and N >= 3
//                      (kOverlapFromRanks) the words' sum starts during backward instead: once a
//                      layer's backward is done its tensors' words are final (their grids were
//                      fixed before their first term), so their sum over ranks starts
//                      (collectives/grid_exchange.hpp) while the layers before it run, polled
//                      between the pieces of their terms; the agreement, the rounding of each
//                      rank's chunk and the all-gather follow after backward as before. Integer
//                      sums: the same bits either way.
//   5. the loss       each micro-batch's loss sum (a double over its m samples, not scaled)
//                      is one term of a one-element ExactSum, summed over ranks the same way
//                      and rounded to float32 once: the logged loss has the same bits for any
//                      N and split. Rank 0 reports it as its share of the metrics window's sum
//                      and the other ranks report 0, so the window's sum over ranks is exact.
//   Nothing carries over between steps (clear() per step), so a run saved at N ranks resumes
//   bitwise at another N.
//   Trace (--trace-steps): on lane 0, "exact: forward, loss, backward" (the call), inside
//   it per layer "exact: agree on bounds" (the small max over ranks), "exact: add to the
//   accumulator" per piece of a term (its rounding onto the grid) and, with overlap, "exact:
//   start the words' sum" (a layer's words sent), then "exact: sum over ranks and round"
//   (the agreement on counts and flags, the words' sum or its rest, the rounding back),
//   "exact: loss over ranks" and "optimizer": bench/README-exact.md splits the step's cost
//   with them.
//
// Bounds. A layer's term for micro-batch j sums k_j products: dW elements Σ dy·x (Linear: k_j
// = the rows; Conv2d: rows · Ho · Wo), db elements Σ dy. Each is at most k_j·max|dy|·max|x|
// over the micro-batch's rows in exact arithmetic, and twice that after float rounding
// (layers/exact_bounds.hpp). The layer passes the largest of these over its micro-batches
// (sink().bound, before its first term, on every rank); the max over ranks is then the max
// over all B/m micro-batches, whatever the split, and E = the power of 2 above it. The grid
// is 2^(E − 51 + c), c = ceil(log2(B/m)): all three are functions of the global batch alone.
// Why a bound rather than the largest term: the grid is known before any term exists, so each
// term (Linear: each tile of rows of dW) is rounded while it is still in cache, and no term is
// kept: the sum's memory is its words, 8 bytes per parameter, for any b_r/m. The price is
// precision: E − log2(X) bits, X the largest |term|. A term at or above 2^E cannot occur by
// the bound; allreduce_grid would refuse it (ExactSumError) on every rank.
//
// Error bound, per element, against the exact sum S of the n = B/m partials (each partial a
// float32 computed as in 2.): |g − S| <= u·|S| + (1 + u)·n·2^(E + c − 52), u = 2^-24,
// c = ceil(log2 n), 2^E the tensor's bound above (grid_sum.hpp derives it); a float32 sum of
// the same partials in some order carries (n − 1)·u·Σ|x| instead.
//
// Layers. ReLU, Flatten, MaxPool2d and Dropout (masks keyed by global sample index) compute
// a sample's outputs from that sample alone.
//   Linear     dW, db per micro-batch of m rows (a product of k = m, then the rows' sum in
//              order); dW in tiles of rows of W whose shape depends on the layer and m
//              alone. y = x·Wᵀ and dx = dy·W on all rows at once through
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
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/collectives/exact_sum.hpp"
#include "ringtrain/collectives/grid_exchange.hpp"
#include "ringtrain/collectives/grid_sum.hpp"
#include "ringtrain/framework/layer.hpp"
#include "ringtrain/framework/parameters.hpp"
#include "ringtrain/framework/sequential.hpp"
#include "ringtrain/framework/train/gradient_sum.hpp"
#include "train/sum/gradient_reducer.hpp"
#include "train/trace.hpp"

namespace ringtrain {

// The fewest ranks at which --overlap on starts the words' sum during backward (ExactGradientSum::
// begin_step says why not at 2).
inline constexpr int kOverlapFromRanks = 3;

// Micro-batch partials one step may add: the accumulator's term limit (B <= this · m).
inline constexpr std::size_t kExactMaxMicroBatches =
    static_cast<std::size_t>(collectives::GridSum::kMaxTerms);

// Throws UsageError naming the first layer the exact step does not support yet.
void check_exact_layers(const Sequential& model);

// One step's exact gradient sum over micro-batches and ranks. Terms come from the layers
// (sink(): one tensor's gradient view per micro-batch, into its block).
class ExactGradient {
 public:
  // One block per parameter tensor of `model`, in buffer order. BatchNorm's tensors are
  // totals over every rank after its exact backward (layers/batchnorm.hpp, "Exact"): their
  // blocks take no terms from the layers, and sum_into leaves them as the layer wrote them.
  // `trace` (may be null) receives spans of the adds, the sum over ranks and the rounding
  // on lane 0 while it is recording.
  // `comm` agrees on the layers' bounds during backward (sink().bound).
  ExactGradient(const Sequential& model, const collectives::Communicator& comm,
                Trace* trace = nullptr);
  ExactGradient(const ExactGradient&) = delete;
  ExactGradient& operator=(const ExactGradient&) = delete;

  // Starts a step of `micro_batches` micro-batches over all ranks: no terms. overlap: the
  // words of each layer's tensors start their sum over ranks once the layer is done
  // (layer_done), else all at once in sum_into.
  void clear(std::size_t micro_batches, bool overlap);
  // Adds one micro-batch's loss sum (not scaled) as one term.
  void add_loss(double loss_sum) { loss_.add(std::span<const double>(&loss_sum, 1)); }
  // For ctx.exact_gradient (layer.hpp): bound(views, bounds) takes the largest of each
  // bound over ranks (collective) and fixes the views' blocks' grids from it ("Bounds");
  // add(view) adds a parameter tensor's gradient view (a span of the model's gradient
  // buffer, as bind() gave it) as one term of its block, add_pieces(view, ...) pieces of
  // terms. Each throws Error for any other span.
  const ExactGradientSink& sink() const { return sink_; }
  // Marks the sum not finite (a non-finite loss or an injected fault): every rank skips.
  void poison();
  // Backward has finished layer `layer` (and every layer after it): with overlap, the words
  // of their tensors start their sum over ranks (collectives/grid_exchange.hpp). Collective.
  void layer_done(std::size_t layer);
  // Moves the sums in flight (between pieces of backward's work).
  void poll();
  // What sum_into rounds: the whole gradient on every rank, or only this rank's chunk
  // (collectives::reduce_scatter_grid; the rest of the buffer is left unsummed) for a ZeRO-1
  // shard that is that chunk. kOwnChunk needs the words' sum after backward (overlap off).
  enum class Rounded { kWhole, kOwnChunk };
  // gradient <- the sum over ranks of every rank's partials, rounded once (the same bits on
  // every rank), except BatchNorm's tensors, left as they are. Returns whether every element
  // of the whole sum is finite, the same on every rank. Collective.
  // Also sums the losses over ranks: loss() is then the step's loss sum, the same bits on
  // every rank.
  bool sum_into(const collectives::Communicator& comm, std::span<float> gradient,
                Rounded rounded = Rounded::kWhole);
  double loss() const { return loss_total_; }
  // Seconds of this step's communication inside forward and backward: the bounds' agreement
  // (a collective per layer, where a rank with fewer rows waits for the others) and the
  // words' sums started and polled during backward. Compute net of it is a rank's own.
  double inside_compute_s() const { return inside_compute_s_; }

 private:
  // A span [begin_s, now) named `name` on lane 0, if the trace is recording this step.
  void span(std::size_t name, double begin_s) const;

  // The layers' sink: a view of the gradient buffer into its tensor's block.
  class Sink final : public ExactGradientSink {
   public:
    explicit Sink(ExactGradient& owner) : owner_(owner) {}
    void bound(std::span<const std::span<float>> gradients,
               std::span<const double> bounds) const override;
    void add(std::span<const float> gradient) const override;
    void add_pieces(std::span<float> gradient, std::size_t offset, std::size_t length,
                    std::span<const float> pieces, std::size_t first_term) const override;

   private:
    // The block of the tensor whose gradient view this is; Error for any other span.
    std::size_t block_of(std::span<const float> gradient) const;
    ExactGradient& owner_;
  };
  struct Range {  // elements [offset, offset + size) of the gradient buffer
    std::size_t offset, size;
  };

  const collectives::Communicator& comm_;
  collectives::GridSum sum_;
  std::int64_t micro_batches_ = 0;  // this step's, over all ranks: every block's most terms
  collectives::ExactSum loss_{1};
  double loss_total_ = 0.0;
  double inside_compute_s_ = 0.0;
  Sink sink_{*this};
  const float* gradient_ = nullptr;  // the model's gradient buffer (the views' base)
  std::vector<Range> tensors_;       // every tensor, in buffer order: block b is tensors_[b]
  std::vector<Range> totals_;        // BatchNorm's tensors: left out of sum_into's rounding
  std::vector<float> saved_;         // their values while sum_into rounds the buffer
  Trace* trace_;                     // null: no spans
  std::size_t add_name_ = 0, bound_name_ = 0, sum_name_ = 0, loss_name_ = 0, start_name_ = 0;
  bool overlap_ = false;                     // this step's words start during backward
  collectives::GridExchange exchange_;       // overlap: their sums over ranks
  std::vector<std::size_t> first_block_of_;  // per layer: its first tensor (or any later one's)
};

// --reduction exact as the step's way to sum (gradient_sum.hpp): the layers add each
// micro-batch's gradient into an ExactGradient during backward, the loss is taken per
// micro-batch, finish() sums over ranks and rounds once, and the whole buffer comes back for
// the update (--zero 1: each bucket's shard, its all-gather after it, as GradientReducer does
// with overlap off). When the whole buffer is rounded, the total is the same on every rank, so
// every rank sees the same (non-)finite gradient without another agreement.
// --zero 1 on the ring: the reducer has one bucket, so a rank's shard is the chunk that the
// words' reduce-scatter leaves it; with the words summed after backward each rank then rounds
// only that chunk, and the gradient's all-gather is left out (ExactGradient::Rounded::
// kOwnChunk; the ranks agree on a finite sum with one small allreduce instead).
// Account: comm_s = exposed_s = the sum over ranks (and the all-gathers), 2 collectives (the
// gradient's and the loss's exact allreduces; 3 with the own chunk's finite verdict) and the
// all-gathers'.
class ExactGradientSum final : public GradientSum {
 public:
  // An ExactGradient of `model` in micro-batches of micro_batch samples, and a
  // GradientReducer on `reducer`'s buckets for ZeRO-1's all-gathers (and the shard and the
  // MPI lock). `trace` (may be null) receives the exact sum's spans and the step's pass
  // ("exact: forward, loss, backward"). Collective.
  ExactGradientSum(const collectives::Communicator& comm, Sequential& model,
                   const ReducerOptions& reducer, std::size_t micro_batch, Trace* trace);

  void begin_step(bool overlap, std::size_t global_samples) override;
  void prepare(StepContext& ctx) override;
  std::size_t loss_rows(std::size_t /*local_rows*/) const override { return micro_batch_; }
  void add_loss(double loss_sum) override { exact_.add_loss(loss_sum); }
  void layer_done(std::size_t layer) override { exact_.layer_done(layer); }
  bool finish(bool local_ok) override;
  std::optional<ShardPiece> next_summed() override;
  // Rank 0 reports the exact loss and the other ranks 0, so the window's sum over ranks is
  // exact.
  double loss_share(double /*local_loss_sum*/) const override;
  double inside_compute_s() const override { return exact_.inside_compute_s(); }
  const StepComm& account() const override { return account_; }
  const OptimizerShard& shard() const override { return reducer_.shard(); }
  collectives::ErrorFeedback& feedback() override { return reducer_.feedback(); }
  std::mutex& mpi_mutex() override { return reducer_.mpi_mutex(); }

  const GradientReducer& reducer() const { return reducer_; }
  // Whether --zero 1's shard is this rank's chunk of the words, so that a step whose words
  // are summed after backward rounds only that chunk.
  bool shard_is_chunk() const { return shard_is_chunk_; }

 private:
  const collectives::Communicator& comm_;
  std::span<float> grads_;
  std::size_t micro_batch_;
  GradientReducer reducer_;
  ExactGradient exact_;
  StepComm account_;
  bool shard_is_chunk_ = false;  // --zero 1's shard is this rank's chunk of the words
  bool whole_ = false;           // the whole buffer goes back next
  bool gathering_ = false;       // --zero 1: the reducer hands back the buckets' pieces
  Trace* trace_;
  std::size_t pass_name_ = 0;
  double pass_start_s_ = 0.0;
  std::function<void()> poll_;  // ctx.poll: the exact sum's words in flight move
};

}  // namespace ringtrain
