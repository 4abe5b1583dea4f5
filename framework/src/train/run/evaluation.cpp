// Test-set evaluation over all ranks (evaluation.hpp).
#include "ringtrain/framework/train/evaluation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "ringtrain/collectives/small.hpp"
#include "ringtrain/framework/data/sampler.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/loss.hpp"

namespace ringtrain {
namespace {

// One chunk's loss sums and outputs: n samples of `test` at `ids` through the model.
// `predicted` (test.size() x width doubles, or empty) receives each sample's output row.
struct ChunkBuffers {
  std::vector<std::uint64_t> ids;
  std::vector<float> x;              // (chunk, input...)
  std::vector<std::int32_t> labels;  // (chunk) classification
  std::vector<float> targets;        // (chunk, targets) regression
};

LossResult evaluate_chunk(Sequential& model, const data::Dataset& test, std::size_t n,
                          const StepContext& ctx, ChunkBuffers& b, std::span<double> predicted) {
  const std::size_t pixels = num_elements(model.input_shape());
  const std::size_t width = num_elements(model.output_shape());
  const std::size_t k = test.num_targets;
  data::gather_batch(test, std::span(b.ids).first(n), std::span(b.x).first(n * pixels),
                     std::span(b.labels).first(test.regression() || !test.labelled() ? 0 : n),
                     std::span(b.targets).first(n * k));
  const auto outputs = model.forward(b.x, n, ctx);
  if (!predicted.empty())
    for (std::size_t i = 0; i < n; ++i) {
      const auto row = std::span(outputs).subspan(i * width, width);
      std::copy(row.begin(), row.end(), predicted.begin() + std::ptrdiff_t(b.ids[i] * width));
    }
  if (!test.labelled()) return {};
  if (test.regression()) return squared_error_eval(outputs, b.targets, n, width);
  return softmax_cross_entropy_eval(outputs, std::span(b.labels).first(n), n, width);
}

// Evaluates this rank's slice (see evaluate_chunk for `predicted`). Collective (one
// allreduce of the sums).
Evaluation evaluate_slice(const collectives::Communicator& comm, Sequential& model,
                          const data::Dataset& test, std::uint64_t seed,
                          std::span<double> predicted) {
  const auto world = static_cast<std::size_t>(comm.size());
  const auto shares = data::near_equal_split(test.size(), world);
  const data::Slice mine =
      data::rank_slice(shares, static_cast<std::size_t>(comm.rank()), test.size());
  ChunkBuffers b{std::vector<std::uint64_t>(kEvalChunk),
                 std::vector<float>(kEvalChunk * num_elements(model.input_shape())),
                 std::vector<std::int32_t>(test.regression() || !test.labelled() ? 0 : kEvalChunk),
                 std::vector<float>(kEvalChunk * test.num_targets)};
  double totals[2] = {0.0, 0.0};  // correct, loss sum
  StepContext ctx;
  ctx.training = false;
  ctx.seed = seed;
  for (std::size_t begin = 0; begin < mine.count; begin += kEvalChunk) {
    const std::size_t n = std::min(kEvalChunk, mine.count - begin);
    for (std::size_t i = 0; i < n; ++i) b.ids[i] = mine.begin + begin + i;
    const LossResult r = evaluate_chunk(model, test, n, ctx, b, predicted);
    totals[0] += double(r.correct);
    totals[1] += r.loss_sum;
  }
  if (world > 1) collectives::allreduce_sum(comm, std::span<double>(totals));
  const double samples = double(test.size());
  Evaluation e;
  e.loss = totals[1] / samples;
  if (test.regression())
    e.mse = e.loss;  // ℓ_i is sample i's mean squared error (loss.hpp)
  else
    e.accuracy = totals[0] / samples;
  return e;
}

// evaluate_slice with every rank's predictions summed into `predicted` (zeros outside a rank's
// slice: the sum over ranks is every sample's). Collective.
Evaluation evaluate_gathered(const collectives::Communicator& comm, Sequential& model,
                             const data::Dataset& test, std::uint64_t seed,
                             std::vector<double>& predicted) {
  const Evaluation e = evaluate_slice(comm, model, test, seed, predicted);
  if (comm.size() > 1) collectives::allreduce_sum(comm, std::span<double>(predicted));
  return e;
}

}  // namespace

Metric metric_for(bool regression) {
  if (regression) return {"test_mse", "test MSE", false};
  return {"test_accuracy", "test accuracy", true};
}

Metric metric_for(bool regression, bool validation) {
  if (!validation) return metric_for(regression);
  if (regression) return {"validation_mse", "validation MSE", false};
  return {"validation_accuracy", "validation accuracy", true};
}

Evaluation evaluate(const collectives::Communicator& comm, Sequential& model,
                    const data::Dataset& test, std::uint64_t seed) {
  return evaluate_slice(comm, model, test, seed, {});
}

Evaluation evaluate(const collectives::Communicator& comm, Sequential& model,
                    const data::Dataset& test, std::uint64_t seed, std::span<float> outputs) {
  const std::size_t width = num_elements(model.output_shape());
  if (outputs.size() != test.size() * width)
    throw Error(fmt::format("evaluate: {} output values for {} samples of {} outputs",
                            outputs.size(), test.size(), width));
  std::vector<double> predicted(outputs.size(), 0.0);
  const Evaluation e = evaluate_gathered(comm, model, test, seed, predicted);
  std::transform(predicted.begin(), predicted.end(), outputs.begin(),
                 [](double v) { return static_cast<float>(v); });
  return e;
}

std::size_t argmax(std::span<const float> logits) {
  std::size_t best = 0;
  for (std::size_t c = 1; c < logits.size(); ++c)
    if (logits[c] > logits[best]) best = c;
  return best;
}

}  // namespace ringtrain
