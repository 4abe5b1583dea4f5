// The exact gradient of `--reduction exact` (exact_step.hpp) and the layers it supports.
#include "train/sum/exact_step.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ringtrain/collectives/schedule.hpp"
#include "ringtrain/collectives/small.hpp"
#include "ringtrain/framework/blas.hpp"
#include "ringtrain/framework/error.hpp"
#include "train/now.hpp"

namespace ringtrain {
namespace {

// Block sizes of the accumulator: one per tensor, in buffer order (entries are contiguous).
std::vector<std::size_t> tensor_blocks(const ParameterStore& params) {
  std::vector<std::size_t> sizes;
  std::size_t next = 0;
  for (const ParameterEntry& e : params.entries()) {
    if (e.offset != next)
      throw Error(
          fmt::format("exact sum: parameter {} starts at {}, expected {}", e.name, e.offset, next));
    sizes.push_back(e.size);
    next += e.size;
  }
  if (next != params.num_elements())
    throw Error(
        fmt::format("exact sum: tensors cover {} of {} parameters", next, params.num_elements()));
  return sizes;
}

// The reducer's options under the exact sum: with --zero 1 on the ring, one bucket, so that
// each rank's shard is the chunk of the whole buffer that the words' reduce-scatter leaves it
// (ExactGradientSum::finish rounds only that chunk). The bucket cap only sizes ZeRO-1's
// all-gathers here; the words move in their own segments.
ReducerOptions exact_reducer_options(ReducerOptions options, const ParameterStore& params) {
  if (options.zero && options.ring.algorithm == collectives::Algorithm::kRing)
    options.cap_bytes = std::max<std::size_t>(4, params.num_elements() * sizeof(float));
  return options;
}

// Whether this rank's shard is its chunk of the words: one piece, that chunk
// (collectives::reduce_scatter_grid).
bool shard_is_own_chunk(const OptimizerShard& shard, const collectives::Communicator& comm) {
  const std::size_t M = shard.total_elements(), N = std::size_t(comm.size());
  const std::size_t r = std::size_t(comm.rank());
  const std::vector<ShardPiece>& pieces = shard.pieces();
  return shard.sharded() && N > 1 && pieces.size() == 1 &&
         pieces[0].flat_offset == collectives::chunk_begin(M, N, r) &&
         pieces[0].count == collectives::chunk_size(M, N, r);
}

}  // namespace

// The layers whose micro-batch gradient depends on its samples and its row count alone
// (exact_step.hpp, "Layers"), and BatchNorm, whose statistics are exact sums over micro-batches
// and ranks inside the layer (exact_step.hpp, "BatchNorm / SyncBN").
void check_exact_layers(const Sequential& model) {
  static const std::vector<std::string> kSupported = {"linear",  "conv2d",  "maxpool2d", "relu",
                                                      "flatten", "dropout", "batchnorm"};
  for (std::size_t i = 0; i < model.num_layers(); ++i) {
    const std::string kind = model.layer(i).kind();
    if (std::find(kSupported.begin(), kSupported.end(), kind) == kSupported.end())
      throw UsageError(fmt::format(
          "--reduction exact: layer layers.{}.{} is not supported by the exact step yet "
          "(supported: {}); use --reduction sum-scaled",
          i, kind, fmt::join(kSupported, ", ")));
  }
}

ExactGradient::ExactGradient(const Sequential& model, const collectives::Communicator& comm,
                             Trace* trace)
    : comm_(comm),
      sum_(tensor_blocks(model.parameters())),
      gradient_(model.parameters().grads().data()),
      trace_(trace) {
  for (const ParameterEntry& e : model.parameters().entries()) {
    tensors_.push_back({e.offset, e.size});
    if (model.layer(e.layer).kind() == "batchnorm") totals_.push_back({e.offset, e.size});
  }
  std::size_t saved = 0;
  for (const Range& r : totals_) saved += r.size;
  saved_.resize(saved);
  // Layer L's first tensor, or the first of a later layer's: the tensors are in layer order.
  const std::vector<ParameterEntry>& entries = model.parameters().entries();
  first_block_of_.assign(model.num_layers() + 1, entries.size());
  for (std::size_t b = entries.size(); b-- > 0;) {
    if (b + 1 < entries.size() && entries[b].layer > entries[b + 1].layer)
      throw Error("exact sum: parameter tensors are not in layer order");
    for (std::size_t layer = 0; layer <= entries[b].layer; ++layer) first_block_of_[layer] = b;
  }
  if (trace_) {
    add_name_ = trace_->name("exact: add to the accumulator");
    bound_name_ = trace_->name("exact: agree on bounds");
    sum_name_ = trace_->name("exact: sum over ranks and round");
    loss_name_ = trace_->name("exact: loss over ranks");
    start_name_ = trace_->name("exact: start the words' sum");
  }
}

void ExactGradient::clear(std::size_t micro_batches, bool overlap) {
  sum_.clear();
  loss_.clear();
  inside_compute_s_ = 0.0;
  micro_batches_ = static_cast<std::int64_t>(micro_batches);
  overlap_ = overlap;
  if (overlap_) exchange_.begin(comm_, sum_);
}

// The layers from `layer` on have all their terms: their words go to the other ranks.
void ExactGradient::layer_done(std::size_t layer) {
  if (!overlap_ || first_block_of_[layer] >= exchange_.started_from()) return;
  const double t0 = now_s();
  exchange_.start_from(first_block_of_[layer]);
  span(start_name_, t0);
  inside_compute_s_ += now_s() - t0;
}

void ExactGradient::poll() {
  if (!overlap_) return;
  const double t0 = now_s();
  exchange_.progress();
  inside_compute_s_ += now_s() - t0;
}

void ExactGradient::span(std::size_t name, double begin_s) const {
  if (trace_ && trace_->recording()) trace_->span(name, 0, begin_s, now_s());
}

std::size_t ExactGradient::Sink::block_of(std::span<const float> gradient) const {
  // The view's offset in the gradient buffer names its tensor (compared as addresses: a span
  // of another buffer matches no tensor).
  const auto base = reinterpret_cast<std::uintptr_t>(owner_.gradient_);
  const auto at = reinterpret_cast<std::uintptr_t>(gradient.data());
  const std::vector<Range>& tensors = owner_.tensors_;
  const auto it = std::find_if(tensors.begin(), tensors.end(), [&](const Range& r) {
    return at == base + r.offset * sizeof(float) && gradient.size() == r.size;
  });
  if (it == tensors.end())
    throw Error(
        fmt::format("exact gradient sink: a span of {} floats that is not a parameter "
                    "tensor's gradient view",
                    gradient.size()));
  return static_cast<std::size_t>(it - tensors.begin());
}

void ExactGradient::Sink::add(std::span<const float> gradient) const {
  const double t0 = now_s();
  owner_.sum_.add_block(block_of(gradient), gradient);
  owner_.span(owner_.add_name_, t0);
}

// The largest bound of each tensor over ranks fixes its block's grid: the power of 2 above it
// ("Bounds"). A bound that is not finite (an Inf among the layer's inputs) marks the sum not
// finite, so that every rank skips the step.
void ExactGradient::Sink::bound(std::span<const std::span<float>> gradients,
                                std::span<const double> bounds) const {
  if (gradients.size() != bounds.size())
    throw Error(fmt::format("exact gradient sink: {} bounds for {} tensors", bounds.size(),
                            gradients.size()));
  const double t0 = now_s();
  std::vector<double> largest(bounds.begin(), bounds.end());
  for (double& b : largest)
    if (!std::isfinite(b)) b = std::numeric_limits<double>::infinity();
  collectives::allreduce_max(owner_.comm_, largest);
  owner_.inside_compute_s_ += now_s() - t0;
  for (std::size_t i = 0; i < gradients.size(); ++i) {
    if (std::isinf(largest[i])) owner_.sum_.mark_non_finite();
    owner_.sum_.fix_grid(block_of(gradients[i]), collectives::GridSum::power_above(largest[i]),
                         owner_.micro_batches_);
  }
  owner_.span(owner_.bound_name_, t0);
}

void ExactGradient::Sink::add_pieces(std::span<float> gradient, std::size_t offset,
                                     std::size_t length, std::span<const float> pieces,
                                     std::size_t first_term) const {
  const double t0 = now_s();
  owner_.sum_.add_pieces(block_of(gradient), offset, length, pieces,
                         static_cast<std::int64_t>(first_term));
  owner_.span(owner_.add_name_, t0);
  owner_.poll();  // between pieces of a layer's terms: the later layers' words move
}

void ExactGradient::poison() {
  sum_.mark_non_finite();
}

bool ExactGradient::sum_into(const collectives::Communicator& comm, std::span<float> gradient,
                             Rounded rounded) {
  if (rounded == Rounded::kOwnChunk && overlap_)
    throw Error("exact sum: only the words summed after backward can be rounded chunk by chunk");
  const double t0 = now_s();
  // BatchNorm's totals: kept aside while the whole buffer is rounded (their blocks are empty)
  auto saved = saved_.begin();
  for (const Range& r : totals_)
    saved = std::copy_n(gradient.begin() + std::ptrdiff_t(r.offset), r.size, saved);
  // Each rank sums and rounds its chunk of the words, then the ring all-gathers the floats
  // (kWhole), or the finite verdict alone is agreed (kOwnChunk).
  bool finite = true;
  if (rounded == Rounded::kOwnChunk)
    finite = collectives::reduce_scatter_grid(comm, sum_, gradient);
  else if (overlap_)
    collectives::round_exchanged_grid(comm, sum_, exchange_, gradient);
  else
    collectives::allreduce_grid(comm, sum_, gradient);
  auto restore = saved_.cbegin();
  for (const Range& r : totals_) {
    std::copy_n(restore, r.size, gradient.begin() + std::ptrdiff_t(r.offset));
    restore += std::ptrdiff_t(r.size);
  }
  span(sum_name_, t0);
  const double t_loss = now_s();
  collectives::allreduce_exact(comm, loss_);
  float loss = 0.0f;
  loss_.to_float(std::span(&loss, 1));
  loss_total_ = loss;
  span(loss_name_, t_loss);
  if (rounded == Rounded::kOwnChunk) return finite;
  return std::all_of(gradient.begin(), gradient.end(), [](float g) { return std::isfinite(g); });
}

ExactGradientSum::ExactGradientSum(const collectives::Communicator& comm, Sequential& model,
                                   const ReducerOptions& reducer, std::size_t micro_batch,
                                   Trace* trace)
    : comm_(comm),
      grads_(model.parameters().grads()),
      micro_batch_(micro_batch),
      reducer_(comm, model.parameters(), exact_reducer_options(reducer, model.parameters()), trace),
      exact_(model, comm, trace),
      shard_is_chunk_(shard_is_own_chunk(reducer_.shard(), comm)),
      trace_(trace),
      poll_([this] { exact_.poll(); }) {
  if (trace_) pass_name_ = trace_->name("exact: forward, loss, backward");
}

// With --overlap on, the words' sum starts during backward from kOverlapFromRanks ranks on.
// At N = 2 on two cores it measured slower than the ring after backward: each rank's core
// does its own copies, and no core is idle to hide them (bench/README-exact.md, "The words'
// sum during backward").
void ExactGradientSum::begin_step(bool overlap, std::size_t global_samples) {
  const bool words_during_backward = overlap && comm_.size() >= kOverlapFromRanks;
  exact_.clear((global_samples + micro_batch_ - 1) / micro_batch_, words_during_backward);
  account_ = StepComm{};
  account_.overlap = words_during_backward;
  whole_ = gathering_ = false;
  pass_start_s_ = now_s();
}

// One forward and one backward on the rank's n rows with ctx.exact_micro_batch = m: the
// layers sum per micro-batch inside the call (BatchNorm's statistics over ranks too:
// collective, also with n = 0) and add each micro-batch's dW, db into the exact sum (the
// sink); y and dx of Linear run on the row-stable products where this CPU has them.
void ExactGradientSum::prepare(StepContext& ctx) {
  ctx.poll = &poll_;  // the words' sums started during backward (overlap on)
  ctx.exact_micro_batch = micro_batch_;
  ctx.exact_gradient = &exact_.sink();
  ctx.exact_row_stable = blas::own_kernels_supported();
}

bool ExactGradientSum::finish(bool local_ok) {
  // The layers' spans, and their adds into the exact sum, lie inside this one.
  if (trace_ && trace_->recording()) trace_->span(pass_name_, 0, pass_start_s_, now_s());
  if (!local_ok) exact_.poison();
  const double t0 = now_s();
  // --zero 1 with its shard the rank's chunk: only that chunk is rounded (no all-gather)
  const bool own_chunk = shard_is_chunk_ && !account_.overlap;
  const bool applied = exact_.sum_into(
      comm_, grads_,
      own_chunk ? ExactGradient::Rounded::kOwnChunk : ExactGradient::Rounded::kWhole);
  account_.comm_s = account_.exposed_s = now_s() - t0;
  account_.inside_compute_s = exact_.inside_compute_s();
  account_.collectives = own_chunk ? 3 : 2;  // own chunk: the finite verdict's allreduce too
  if (applied && reducer_.options().zero) {
    reducer_.begin_summed();
    gathering_ = true;
  } else {
    whole_ = applied;
  }
  return applied;
}

std::optional<ShardPiece> ExactGradientSum::next_summed() {
  if (whole_) {
    whole_ = false;
    return ShardPiece{0, grads_.size(), 0};
  }
  if (!gathering_) return std::nullopt;
  if (std::optional<ShardPiece> piece = reducer_.next_summed()) return piece;
  // --zero 1: every rank holds the same rounded total, so each updated only its shard of
  // every bucket and the buckets' all-gathers brought the rest; they join the account.
  gathering_ = false;
  const StepComm& gathers = reducer_.account();
  account_.comm_s += gathers.comm_s;
  account_.exposed_s += gathers.exposed_s;
  account_.collectives += gathers.collectives;
  return std::nullopt;
}

double ExactGradientSum::loss_share(double /*local_loss_sum*/) const {
  return comm_.rank() == 0 ? exact_.loss() : 0.0;
}

}  // namespace ringtrain
