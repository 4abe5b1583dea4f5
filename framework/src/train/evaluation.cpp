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

// The index of the largest of `logits`, the first one on ties (as the loss counts correct).
std::size_t argmax(std::span<const float> logits) {
  std::size_t best = 0;
  for (std::size_t c = 1; c < logits.size(); ++c)
    if (logits[c] > logits[best]) best = c;
  return best;
}

// Evaluates this rank's slice; `predicted` (test.size() doubles, or empty) receives the
// slice's predicted classes at their sample indices. Collective (one allreduce of the sums).
Evaluation evaluate_slice(const collectives::Communicator& comm, Sequential& model,
                          const data::Dataset& test, std::uint64_t seed,
                          std::span<double> predicted) {
  const auto world = static_cast<std::size_t>(comm.size());
  const auto shares = data::near_equal_split(test.size(), world);
  const data::Slice mine =
      data::rank_slice(shares, static_cast<std::size_t>(comm.rank()), test.size());
  const std::size_t pixels = num_elements(model.input_shape());
  const std::size_t classes = num_elements(model.output_shape());
  std::vector<std::uint64_t> ids(kEvalChunk);
  std::vector<float> x(kEvalChunk * pixels);  // (chunk, input...)
  std::vector<std::int32_t> y(kEvalChunk);    // (chunk)
  double totals[2] = {0.0, 0.0};              // correct, loss sum
  StepContext ctx;
  ctx.training = false;
  ctx.seed = seed;
  for (std::size_t begin = 0; begin < mine.count; begin += kEvalChunk) {
    const std::size_t n = std::min(kEvalChunk, mine.count - begin);
    for (std::size_t i = 0; i < n; ++i) ids[i] = mine.begin + begin + i;
    data::gather_batch(test, std::span(ids).first(n), std::span(x).first(n * pixels),
                       std::span(y).first(n));
    const auto logits = model.forward(x, n, ctx);
    const LossResult r = softmax_cross_entropy_eval(logits, std::span(y).first(n), n, classes);
    totals[0] += double(r.correct);
    totals[1] += r.loss_sum;
    if (!predicted.empty())
      for (std::size_t i = 0; i < n; ++i)
        predicted[ids[i]] = double(argmax(std::span(logits).subspan(i * classes, classes)));
  }
  if (world > 1) collectives::allreduce_sum(comm, std::span<double>(totals));
  return {totals[0] / double(test.size()), totals[1] / double(test.size())};
}

}  // namespace

Evaluation evaluate(const collectives::Communicator& comm, Sequential& model,
                    const data::Dataset& test, std::uint64_t seed) {
  return evaluate_slice(comm, model, test, seed, {});
}

Evaluation evaluate(const collectives::Communicator& comm, Sequential& model,
                    const data::Dataset& test, std::uint64_t seed,
                    std::span<std::int64_t> predictions) {
  if (predictions.size() != test.size())
    throw Error(fmt::format("evaluate: {} predictions for a test set of {} samples",
                            predictions.size(), test.size()));
  // Zeros outside this rank's slice: the sum over ranks is every sample's prediction.
  std::vector<double> predicted(test.size(), 0.0);
  const Evaluation e = evaluate_slice(comm, model, test, seed, predicted);
  if (comm.size() > 1) collectives::allreduce_sum(comm, std::span<double>(predicted));
  std::transform(predicted.begin(), predicted.end(), predictions.begin(),
                 [](double c) { return static_cast<std::int64_t>(c); });
  return e;
}

}  // namespace ringtrain
