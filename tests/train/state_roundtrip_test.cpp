// Round trip of every stateful component through a checkpoint file: parameters, batch-norm
// buffers, optimizer state (SGD momentum; AdamW moments and step count), sampler position,
// progress counters. A state is advanced a few steps, captured, written, read into a fresh
// state of the same configuration and restored; the fresh state must then capture to the
// same tree bit for bit and continue the same computation (next update, next batch). A
// checkpoint of another data order (seed, global batch, training set) is refused by name.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "ringtrain/checkpoint/file.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/train/state_values.hpp"
#include "ringtrain/framework/train/training_state.hpp"
#include "ringtrain/models/registry.hpp"

namespace {

namespace fs = std::filesystem;
using namespace ringtrain;
using checkpoint::Group;

constexpr std::size_t kDatasetSize = 1000;

// One training state of a model and optimizer, owning its parts.
struct Rig {
  std::unique_ptr<Sequential> model;
  std::unique_ptr<Optimizer> optimizer;
  data::GlobalSampler sampler;
  TrainingCounters counters;
  std::uint64_t seed;

  Rig(const std::string& model_name, const std::string& optimizer_name, std::uint64_t seed_,
      std::size_t global_batch = 32, std::size_t dataset_size = kDatasetSize)
      : model(models::make_model(model_name, models::ModelOptions{{24, 16}, 0.0f})),
        sampler(seed_, dataset_size, global_batch),
        seed(seed_) {
    model->plan(models::input_shape(), 4);
    model->initialize(seed);
    OptimizerConfig config;
    config.name = optimizer_name;
    config.weight_decay = 0.01f;
    optimizer = make_optimizer(config, model->parameters().num_elements());
  }
  TrainingState state() { return {*model, *optimizer, sampler, counters, seed}; }

  // One update with a gradient that differs per element and step; the next batch.
  void step(std::uint64_t k) {
    std::vector<float> grads(model->parameters().num_elements());
    for (std::size_t i = 0; i < grads.size(); ++i)
      grads[i] = float((i * 7 + k * 13) % 101) * 1e-3f - 0.05f;
    optimizer->step(model->parameters().values(), grads, 0.01f);
    sampler.next_batch();
    ++counters.step;
  }
};

// A state some steps in: every component away from its initial value.
void advance(Rig& rig) {
  for (std::uint64_t k = 0; k < 40; ++k) rig.step(k);  // 40 x 32 > 1000: into epoch 1
  auto buffers = rig.model->buffers().values();
  for (std::size_t i = 0; i < buffers.size(); ++i) buffers[i] = 0.5f + float(i) * 0.25f;
  TrainingCounters& p = rig.counters;
  p.samples_seen = 1280;
  p.useful_compute_s = 1.25;
  p.skipped_steps = 2;
  p.nonfinite_in_a_row = 1;
  p.best_selection_metric = 0.875;
  p.final_selection_metric = 0.75;
  p.window_loss = 12.5;
  p.window_samples = 96;
  p.window_steps = 3;
}

bool same_bits(const checkpoint::Entry& a, const checkpoint::Entry& b) {
  if (a.group != b.group || a.name != b.name || a.kind() != b.kind()) return false;
  if (const auto* x = std::get_if<checkpoint::FloatArray>(&a.value)) {
    const auto& y = std::get<checkpoint::FloatArray>(b.value);
    return x->shape == y.shape && x->values.size() == y.values.size() &&
           std::memcmp(x->values.data(), y.values.data(), x->values.size() * sizeof(float)) == 0;
  }
  if (const auto* x = std::get_if<double>(&a.value))
    return std::memcmp(x, &std::get<double>(b.value), sizeof(double)) == 0;
  if (const auto* x = std::get_if<std::string>(&a.value))
    return *x == std::get<std::string>(b.value);
  if (const auto* x = std::get_if<std::int64_t>(&a.value))
    return *x == std::get<std::int64_t>(b.value);
  return std::get<std::uint64_t>(a.value) == std::get<std::uint64_t>(b.value);
}

// capture -> write_file -> read_file (checked against the fresh state's layout) -> restore
void round_trip(Rig& from, Rig& to, const fs::path& file) {
  checkpoint::Header header;
  header.step = from.counters.step;
  checkpoint::write_file(file, header, capture(from.state()));
  const checkpoint::StateTree tree =
      checkpoint::read_file(file, checkpoint::Expected::of(capture(to.state())));
  check_compatible(tree, to.state());
  restore(tree, to.state());
}

struct TempFile {
  fs::path dir = fs::temp_directory_path() / ("ringtrain-roundtrip-" + std::to_string(::getpid()));
  TempFile() { fs::create_directories(dir); }
  ~TempFile() { fs::remove_all(dir); }
};

}  // namespace

TEST_CASE("every stateful component round trips through a checkpoint file bitwise",
          "[train][checkpoint]") {
  for (const char* model : {"mlp", "cnn-bn"})
    for (const char* optimizer : {"sgd", "adamw"}) {
      DYNAMIC_SECTION(model << " + " << optimizer) {
        TempFile tmp;
        Rig a(model, optimizer, 7);
        advance(a);
        Rig b(model, optimizer, 7);  // fresh: initial parameters, empty optimizer state
        const checkpoint::StateTree before = capture(b.state());
        round_trip(a, b, tmp.dir / "step.h5");

        const checkpoint::StateTree want = capture(a.state()), got = capture(b.state());
        REQUIRE(got.size() == want.size());
        std::size_t changed = 0;  // entries the round trip had to change in b
        for (std::size_t i = 0; i < want.size(); ++i) {
          INFO(checkpoint::entry_path(want.entries()[i].group, want.entries()[i].name));
          CHECK(same_bits(got.entries()[i], want.entries()[i]));
          changed += same_bits(before.entries()[i], want.entries()[i]) ? 0 : 1;
        }
        // Parameters, optimizer tensors and counters all moved (not a vacuous comparison).
        CHECK(changed >= a.model->parameters().count() * 2 + 6);
        CHECK(b.optimizer->step_count() == 40);
        CHECK(b.sampler.state().epoch == 1);
        CHECK(b.sampler.state().position == a.sampler.state().position);

        // The same computation continues: one more update and batch agree bit for bit.
        a.step(40);
        b.step(40);
        const auto pa = a.model->parameters().values(), pb = b.model->parameters().values();
        CHECK(std::equal(pa.begin(), pa.end(), pb.begin(), pb.end(),
                         [](float x, float y) { return std::memcmp(&x, &y, sizeof x) == 0; }));
        const auto ba = a.sampler.next_batch(), bb = b.sampler.next_batch();
        CHECK(
            std::equal(ba.samples.begin(), ba.samples.end(), bb.samples.begin(), bb.samples.end()));
      }
    }
}

TEST_CASE("a checkpoint of another data order is refused, naming what differs",
          "[train][checkpoint]") {
  TempFile tmp;
  Rig a("mlp", "sgd", 7);
  advance(a);
  const auto refusal = [&](Rig& other) -> std::string {
    try {
      round_trip(a, other, tmp.dir / "step.h5");
    } catch (const UsageError& e) {
      return e.what();
    }
    return "ACCEPTED";
  };
  Rig other_seed("mlp", "sgd", 8);
  CHECK_THAT(refusal(other_seed), Catch::Contains("written with seed 7, this run has seed 8") &&
                                      Catch::Contains("--seed"));
  Rig other_batch("mlp", "sgd", 7, 64);
  CHECK_THAT(refusal(other_batch),
             Catch::Contains("global batch 32, this run has global batch 64") &&
                 Catch::Contains("--global-batch"));
  Rig other_data("mlp", "sgd", 7, 32, 2000);
  CHECK_THAT(refusal(other_data), Catch::Contains("training set size 1000") &&
                                      Catch::Contains("training set size 2000"));
  Rig same("mlp", "sgd", 7);
  CHECK(refusal(same) == "ACCEPTED");
}

namespace {

// The counters of a run of 100 samples, global batch 8 (13 steps an epoch, the last short),
// after `step` steps of a 40-step run.
ringtrain::checkpoint::StateTree counters_after(std::uint64_t step) {
  using ringtrain::checkpoint::Group;
  ringtrain::checkpoint::StateTree tree;
  tree.put_u64(Group::kOptimizer, "step_count", step);
  tree.put_u64(Group::kSchedule, "step", step);
  tree.put_u64(Group::kData, "seed", 0);
  tree.put_u64(Group::kData, "epoch", step / 13);
  tree.put_u64(Group::kData, "position", (step % 13) * 8);
  tree.put_u64(Group::kData, "dataset_size", 100);
  tree.put_u64(Group::kData, "global_batch", 8);
  tree.put_u64(Group::kProgress, "step", step);
  tree.put_u64(Group::kProgress, "samples_seen", step / 13 * 100 + (step % 13) * 8);
  tree.put_f64(Group::kProgress, "useful_compute_s", 1.5);
  tree.put_u64(Group::kProgress, "skipped_steps", 0);
  tree.put_u64(Group::kProgress, "nonfinite_in_a_row", 0);
  tree.put_f64(Group::kProgress, "best_test_accuracy", 0.5);
  tree.put_f64(Group::kProgress, "final_test_accuracy", 0.5);
  tree.put_f64(Group::kProgress, "window_loss", 2.0);
  tree.put_f64(Group::kProgress, "window_samples", 16);
  tree.put_u64(Group::kProgress, "window_steps", std::min<std::uint64_t>(step, 2));
  return tree;
}

ringtrain::checkpoint::Header header_after(std::uint64_t step) {
  ringtrain::checkpoint::Header header;
  header.step = step;
  header.epoch = step / 13;
  header.config_json = R"({"steps": 40, "global-batch": 8})";
  return header;
}

// Replaces one u64 (or f64) entry of the tree.
template <typename T>
ringtrain::checkpoint::StateTree with(ringtrain::checkpoint::StateTree tree,
                                      ringtrain::checkpoint::Group group, const char* name,
                                      T value) {
  ringtrain::checkpoint::StateTree out;
  for (const auto& e : tree.entries()) {
    if (e.group == group && e.name == name) {
      if constexpr (std::is_same_v<T, double>)
        out.put_f64(group, name, value);
      else
        out.put_u64(group, name, value);
    } else if (e.kind() == ringtrain::checkpoint::Kind::kFloat64) {
      out.put_f64(e.group, e.name, std::get<double>(e.value));
    } else {
      out.put_u64(e.group, e.name, std::get<std::uint64_t>(e.value));
    }
  }
  return out;
}

}  // namespace

TEST_CASE("a checkpoint's counters are checked against each other and the recorded run",
          "[state][hostile]") {
  using ringtrain::check_state_values;
  using ringtrain::checkpoint::Group;
  for (std::uint64_t step : {0, 1, 12, 13, 14, 40})
    CHECK_NOTHROW(check_state_values(counters_after(step), header_after(step), "f.h5"));
  const std::uint64_t huge = std::uint64_t{1} << 63;
  const auto refused = [](const ringtrain::checkpoint::StateTree& tree, std::uint64_t step) {
    ringtrain::checkpoint::Header header = header_after(step);
    header.epoch = tree.u64(Group::kData, "epoch");
    try {
      check_state_values(tree, header, "f.h5");
    } catch (const ringtrain::UsageError& e) {
      return std::string(e.what());
    }
    return std::string("ACCEPTED");
  };
  // A step of 2^63 everywhere it is stored: beyond the recorded run (and its data position).
  ringtrain::checkpoint::StateTree forged = counters_after(20);
  for (auto [g, name] : {std::pair{Group::kProgress, "step"}, std::pair{Group::kSchedule, "step"},
                         std::pair{Group::kOptimizer, "step_count"}})
    forged = with(forged, g, name, huge);
  CHECK_THAT(
      refused(forged, huge),
      Catch::Contains("f.h5: /data is at epoch 1, position 56, but step 9223372036854775808"));
  CHECK_THAT(refused(counters_after(41), 41), Catch::Contains("step 41 is beyond the 40 steps"));
  CHECK_THAT(refused(with(counters_after(20), Group::kData, "position", 1000000000ull), 20),
             Catch::Contains("position 1000000000"));
  CHECK_THAT(refused(with(counters_after(20), Group::kOptimizer, "step_count", 21ull), 20),
             Catch::Contains("/optimizer/step_count is 21"));
  CHECK_THAT(refused(with(counters_after(20), Group::kProgress, "window_loss", double(NAN)), 20),
             Catch::Contains("/progress/window_loss is nan"));
  CHECK_THAT(refused(with(counters_after(20), Group::kSchedule, "step", 19ull), 20),
             Catch::Contains("/schedule 19"));
  CHECK_THAT(refused(with(counters_after(20), Group::kData, "global_batch", 16ull), 20),
             Catch::Contains("the recorded configuration says 8"));
}
