// The exact gradient of `--reduction exact` (exact_step.hpp) and the layers it supports.
#include "ringtrain/framework/train/exact_step.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "ringtrain/collectives/small.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/train/now.hpp"

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

}  // namespace

double available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  double kib = 0.0;
  while (meminfo >> key >> kib) {
    if (key == "MemAvailable:") return kib * 1024.0;
    meminfo.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return std::numeric_limits<double>::infinity();
}

std::size_t exact_kept_bytes(const Sequential& model, std::size_t local_batch, std::size_t m) {
  std::size_t with_terms = 0;  // BatchNorm's tensors take no terms (their totals are exact)
  const ParameterStore& params = model.parameters();
  for (const ParameterEntry& e : params.entries())
    if (model.layer(e.layer).kind() != "batchnorm") with_terms += e.size;
  const std::size_t micro_batches = m == 0 ? 0 : (local_batch + m - 1) / m;
  return micro_batches * with_terms * sizeof(float);
}

void check_exact_memory(const collectives::Communicator& comm, const Sequential& model,
                        std::size_t largest_local_batch, std::size_t m, double available_bytes) {
  const std::size_t per_rank = exact_kept_bytes(model, largest_local_batch, m);
  const double need = static_cast<double>(per_rank) * comm.ranks_per_node();
  std::vector<double> least{-available_bytes};  // the smallest over the ranks' nodes
  collectives::allreduce_max(comm, least);
  const double available = -least[0];
  constexpr double kMiB = 1024.0 * 1024.0, kGiB = 1024.0 * kMiB;
  if (need > available)
    throw UsageError(fmt::format(
        "--reduction exact keeps each micro-batch's gradient until the sum: {} micro-batches "
        "of {:.1f} MiB per rank, {} ranks per node, need {:.1f} GiB, more than the {:.1f} GiB "
        "this node has available; raise --exact-micro-batch (now {}) or spread the ranks over "
        "more nodes",
        (largest_local_batch + m - 1) / m,
        static_cast<double>(exact_kept_bytes(model, m, m)) / kMiB, comm.ranks_per_node(),
        need / kGiB, available / kGiB, m));
}

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

ExactGradient::ExactGradient(const Sequential& model, Trace* trace)
    : sum_(tensor_blocks(model.parameters())),
      gradient_(model.parameters().grads().data()),
      trace_(trace) {
  for (const ParameterEntry& e : model.parameters().entries()) {
    tensors_.push_back({e.offset, e.size});
    if (model.layer(e.layer).kind() == "batchnorm") totals_.push_back({e.offset, e.size});
  }
  std::size_t saved = 0;
  for (const Range& r : totals_) saved += r.size;
  saved_.resize(saved);
  if (trace_) {
    add_name_ = trace_->name("exact: add to the accumulator");
    sum_name_ = trace_->name("exact: sum over ranks and round");
    loss_name_ = trace_->name("exact: loss over ranks");
  }
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

std::span<float> ExactGradient::Sink::term(std::span<float> gradient) const {
  return owner_.sum_.next_term(block_of(gradient));
}

void ExactGradient::Sink::commit(std::span<float> gradient) const {
  const double t0 = now_s();
  owner_.sum_.add_written(block_of(gradient));
  owner_.span(owner_.add_name_, t0);
}

void ExactGradient::poison() {
  sum_.mark_non_finite();
}

bool ExactGradient::sum_into(const collectives::Communicator& comm, std::span<float> gradient) {
  const double t0 = now_s();
  // BatchNorm's totals: kept aside while the whole buffer is rounded (their blocks are empty)
  auto saved = saved_.begin();
  for (const Range& r : totals_)
    saved = std::copy_n(gradient.begin() + std::ptrdiff_t(r.offset), r.size, saved);
  // Each rank sums and rounds its chunk of the words, then the ring all-gathers the floats.
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
  return std::all_of(gradient.begin(), gradient.end(), [](float g) { return std::isfinite(g); });
}

}  // namespace ringtrain
