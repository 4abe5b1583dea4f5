// DataParallelStep on its own (data_parallel_step.hpp), at N = 1 and 2, with both ways to sum
// (the bucketed ring, and --reduction exact), through a probe that records what the step
// tells it (step_probe.hpp):
//   - every step is: begin, forward over the layers in order, backward over them in reverse,
//     the sum, then per summed piece one update followed by the sum again, and one end;
//   - the pieces of an applied step are at least one, and a step the probe poisons is
//     skipped on every rank with no update at all and the parameters bitwise unchanged;
//   - every applied step changes the parameters, and they stay bitwise the same on every
//     rank; the sum's account says whether the step overlapped (the ring) or not (exact).
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "mpi_test.hpp"
#include "ringtrain/framework/layers/linear.hpp"
#include "ringtrain/framework/layers/relu.hpp"
#include "ringtrain/framework/train/data_parallel_step.hpp"

using namespace ringtrain;
using namespace ringtrain::testing;
namespace coll = collectives;

namespace {

constexpr std::size_t kFeatures = 12, kClasses = 4, kSamples = 96, kBatch = 32, kSteps = 4;
constexpr std::uint64_t kPoisoned = 2;  // the step whose gradient the probe poisons

// Each step's calls as words: "begin forward 0 1 2 backward 2 1 0 sum update sum ... end".
class RecordingProbe final : public StepProbe {
 public:
  void begin(std::uint64_t step) override {
    step_ = step;
    steps.emplace_back("begin");
  }
  void enter(StepPhase phase) override {
    static const char* const kWords[] = {"slice", "forward", "backward", "sum", "update"};
    steps.back() += std::string(" ") + kWords[static_cast<int>(phase)];
  }
  void layer_done(std::size_t layer) override { steps.back() += fmt::format(" {}", layer); }
  bool poison_gradient() override { return step_ == kPoisoned; }
  void end(const StepComm& comm, std::span<float> /*parameters*/) override {
    steps.back() += " end";
    overlapped.push_back(comm.overlap);
  }

  std::vector<std::string> steps;
  std::vector<bool> overlapped;

 private:
  std::uint64_t step_ = 0;
};

// Samples that differ by position: x_ij = sin(0.3·i + 0.7·j), labels i mod 4.
data::Dataset blobs() {
  data::Dataset d;
  d.sample_shape = {kFeatures};
  d.num_classes = kClasses;
  d.images = Tensor({kSamples, kFeatures});
  for (std::size_t i = 0; i < kSamples; ++i) {
    d.labels.push_back(static_cast<std::int32_t>(i % kClasses));
    for (std::size_t j = 0; j < kFeatures; ++j)
      d.images[i * kFeatures + j] = std::sin(0.3f * float(i) + 0.7f * float(j));
  }
  return d;
}

std::vector<float> copy(std::span<const float> values) {
  return {values.begin(), values.end()};
}

bool same_bits(const std::vector<float>& a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// "begin forward 0 1 2 backward 2 1 0 sum", then `pieces` times " update sum", then " end".
std::string expected_step(std::size_t layers, std::size_t pieces) {
  std::string words = "begin forward";
  for (std::size_t i = 0; i < layers; ++i) words += fmt::format(" {}", i);
  words += " backward";
  for (std::size_t i = layers; i-- > 0;) words += fmt::format(" {}", i);
  words += " sum";
  for (std::size_t p = 0; p < pieces; ++p) words += " update sum";
  return words + " end";
}

// The count of " update" in one step's words.
std::size_t pieces_in(const std::string& words) {
  std::size_t count = 0;
  for (std::size_t at = words.find(" update"); at != std::string::npos;
       at = words.find(" update", at + 1))
    ++count;
  return count;
}

void check_steps(Reduction reduction, Facts& facts) {
  const coll::Communicator comm;
  const std::string where = fmt::format("N = {}, {}", comm.size(), to_string(reduction));
  const data::Dataset train = blobs();
  Sequential model;
  model.add(std::make_unique<Linear>(kFeatures, 16));
  model.add(std::make_unique<ReLU>());
  model.add(std::make_unique<Linear>(16, kClasses));
  StepPlan plan;
  plan.reduction = reduction;
  plan.local_batches = data::near_equal_split(kBatch, static_cast<std::size_t>(comm.size()));
  plan.schedule.base_lr = 0.1f;
  plan.exact_micro_batch = 8;
  model.plan(train.sample_shape, kBatch);
  model.initialize(7);
  ReducerOptions reducer;
  reducer.cap_bytes = 256;  // several buckets, several pieces
  RecordingProbe probe;
  DataParallelStep step(comm, model, train, plan, reducer, OptimizerConfig{}, probe);
  data::GlobalSampler sampler(7, train.size(), kBatch);

  for (std::uint64_t s = 0; s < kSteps; ++s) {
    const std::vector<float> before = copy(model.parameters().values());
    const StepOutcome outcome = step.run(s, sampler.next_batch());
    const std::string& words = probe.steps.back();
    const std::size_t pieces = pieces_in(words);
    const bool poisoned = s == kPoisoned;
    facts.check(probe.steps.size() == s + 1,
                fmt::format("{}: {} begins after step {}", where, probe.steps.size(), s));
    facts.check(words == expected_step(model.num_layers(), pieces),
                fmt::format("{}: step {} was '{}'", where, s, words));
    facts.check(
        outcome.applied == !poisoned && (poisoned ? pieces == 0 : pieces >= 1),
        fmt::format("{}: step {} applied {} in {} pieces", where, s, outcome.applied, pieces));
    facts.check(same_bits(before, model.parameters().values()) == poisoned,
                fmt::format("{}: step {} {} the parameters", where, s,
                            poisoned ? "changed" : "left unchanged"));
    facts.check(probe.overlapped.back() == (reduction != Reduction::kExact),
                fmt::format("{}: step {} overlap {}", where, s, bool(probe.overlapped.back())));
  }
  // Rank 0's parameters, bitwise, on every rank.
  std::vector<float> root = copy(model.parameters().values());
  MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  facts.check(same_bits(root, model.parameters().values()),
              where + ": the parameters differ from rank 0's");
}

}  // namespace

TEST_CASE("the step tells its probe the recipe, and a poisoned step is skipped on every rank") {
  Facts facts;
  check_steps(Reduction::kSumScaled, facts);
  check_steps(Reduction::kExact, facts);
  REQUIRE_ALL_RANKS(facts);
}
