// Spec-built models through the real Trainer, at each N:
//  * the built-in models from their spec files train to bitwise the same parameters as the
//    hand-written builders they replaced (reference_models.hpp), on Fashion-MNIST;
//  * a user's spec with conv2d, batchnorm (SyncBN), maxpool2d and dropout, on a user's .npy
//    dataset, trains at N ranks (uneven local batches) to the parameters of one process
//    within 1e-5.
#include <fmt/format.h>
#include <mpi.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "../data/user_data_files.hpp"
#include "../train/train_rig.hpp"
#include "mpi_test.hpp"
#include "reference_models.hpp"
#include "spec_texts.hpp"

using namespace ringtrain;
using namespace ringtrain::testing;

namespace {

// Trains `model` (or, if null, the model `ringtrain train` builds from config.model for the
// data) on `comm` with its run directory under `dir`; returns the final parameters.
std::vector<float> train(TrainConfig config, MPI_Comm comm_handle, const std::filesystem::path& dir,
                         std::unique_ptr<Sequential> model = nullptr) {
  static int runs = 0;  // each run its own folder (only rank 0 writes)
  config.run_dir = (dir / fmt::format("run-{}", runs++)).string();
  collectives::Communicator comm(comm_handle);
  std::unique_ptr<Trainer> trainer;
  if (model) {
    trainer = std::make_unique<Trainer>(config, std::move(model), models::input_shape(), comm);
  } else {
    const models::ModelSpec spec =
        models::model_spec(config.model, model_options(config, models::input_shape(), 10));
    trainer = std::make_unique<Trainer>(
        config,
        [spec, algorithm = config.conv_algorithm](const data::DataInfo& data) {
          return models::build_model(spec, data.sample_shape, data.outputs(), algorithm);
        },
        comm);
  }
  trainer->run();
  const auto p = trainer->model().parameters().values();
  return {p.begin(), p.end()};
}

// 23 train and 9 test samples of (2, 6, 6) float32, 3 classes, and the spec, in `dir`.
void write_user_files(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir / "data");
  for (const bool train_split : {true, false}) {
    const std::uint64_t n = train_split ? 23 : 9;
    std::vector<float> x(n * 72);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = float((i * 7919 + n) % 101) / 50.0f - 1.0f;
    std::vector<std::int64_t> y(n);
    for (std::size_t i = 0; i < n; ++i) y[i] = std::int64_t((i * 5 + 1) % 3);
    const std::string split = train_split ? "train" : "test";
    test::write_plain(dir / "data" / (split + "_x.npy"),
                      test::npy_bytes("<f4", {n, 2, 6, 6}, test::le_bytes(x)));
    test::write_plain(dir / "data" / (split + "_y.npy"),
                      test::npy_bytes("<i8", {n}, test::le_bytes(y)));
  }
  std::ofstream(dir / "net.toml") << kAllTypes;
}

}  // namespace

TEST_CASE("built-in models from spec files train bitwise as the hand-built ones",
          "[models][train]") {
  const auto dir = shared_temp_dir("ringtrain-spec");
  Facts facts;
  for (const std::string name : {"mlp", "cnn-bn"}) {
    TrainConfig config = small_config(name, name == "mlp" ? 6 : 3, 12);
    config.mlp_hidden = "32";
    config.dropout = 0.25f;
    models::ModelOptions options;
    options.mlp_hidden = {32};
    options.dropout = 0.25f;
    auto reference = name == "mlp" ? reference_mlp(options) : reference_cnn(options, true);
    const auto from_spec = train(config, MPI_COMM_WORLD, dir);
    const auto by_hand = train(config, MPI_COMM_WORLD, dir, std::move(reference));
    facts.check(!from_spec.empty() && bitwise_equal(from_spec, by_hand),
                name + ": the spec-built model trained to other parameters");
  }
  if (world_rank() == 0) std::filesystem::remove_all(dir);
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("a user spec with conv2d, batchnorm and dropout trains at N ranks as in one process",
          "[models][train]") {
  const auto dir = shared_temp_dir("ringtrain-spec");
  bool written = true;
  if (world_rank() == 0) {
    try {
      write_user_files(dir);
    } catch (...) {
      written = false;
    }
  }
  REQUIRE(all_ranks(written));
  TrainConfig config = small_config((dir / "net.toml").string(), 8, 7);  // 7 = 4+3, 3+2+2
  config.data_dir = (dir / "data").string();
  config.lr = 0.1f;
  const auto n_ranks = train(config, MPI_COMM_WORLD, dir);
  Facts facts;
  if (world_rank() == 0) {
    const auto one = train(config, MPI_COMM_SELF, dir);
    const double difference = relative_difference(n_ranks, one);
    facts.check(!one.empty() && difference <= 1e-5,
                fmt::format("N={} differs from one process by {}", world_size(), difference));
    std::filesystem::remove_all(dir);
  }
  REQUIRE_ALL_RANKS(facts);
}
