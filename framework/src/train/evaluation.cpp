// Test-set evaluation over all ranks (evaluation.hpp).
#include "ringtrain/framework/train/evaluation.hpp"

#include <algorithm>
#include <vector>

#include "ringtrain/collectives/small.hpp"
#include "ringtrain/framework/data/sampler.hpp"
#include "ringtrain/framework/loss.hpp"

namespace ringtrain {

Evaluation evaluate(const collectives::Communicator& comm, Sequential& model,
                    const data::Dataset& test, std::uint64_t seed) {
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
  }
  if (world > 1) collectives::allreduce_sum(comm, std::span<double>(totals));
  return {totals[0] / double(test.size()), totals[1] / double(test.size())};
}

}  // namespace ringtrain
