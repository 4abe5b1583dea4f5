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
  TrainingProgress progress;
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
  TrainingState state() { return {*model, *optimizer, sampler, progress, seed}; }

  // One update with a gradient that differs per element and step; the next batch.
  void step(std::uint64_t k) {
    std::vector<float> grads(model->parameters().num_elements());
    for (std::size_t i = 0; i < grads.size(); ++i)
      grads[i] = float((i * 7 + k * 13) % 101) * 1e-3f - 0.05f;
    optimizer->step(model->parameters().values(), grads, 0.01f);
    sampler.next_batch();
    ++progress.step;
  }
};

// A state some steps in: every component away from its initial value.
void advance(Rig& rig) {
  for (std::uint64_t k = 0; k < 40; ++k) rig.step(k);  // 40 x 32 > 1000: into epoch 1
  auto buffers = rig.model->buffers().values();
  for (std::size_t i = 0; i < buffers.size(); ++i) buffers[i] = 0.5f + float(i) * 0.25f;
  TrainingProgress& p = rig.progress;
  p.samples_seen = 1280;
  p.useful_compute_s = 1.25;
  p.skipped_steps = 2;
  p.nonfinite_in_a_row = 1;
  p.best_test_metric = 0.875;
  p.final_test_metric = 0.75;
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
  header.step = from.progress.step;
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
