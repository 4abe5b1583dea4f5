// Training on user datasets (--data) through the real Trainer, at each N: the same data as
// IDX, .npy and HDF5 (mapped or chunked) train to bitwise the same model; a cnn is built for
// the data's (C, H, W) samples and class count; the manifest records layout, shapes, dtypes.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../data/user_data_files.hpp"
#include "mpi_test.hpp"
#include "train_rig.hpp"

using namespace ringtrain;
using namespace ringtrain::testing;
using ringtrain::test::Bytes;
using ringtrain::test::le_bytes;
using ringtrain::test::npy_bytes;
using ringtrain::test::SmallData;
using ringtrain::test::write_plain;

namespace {

// Rank 0 runs `write`; every rank learns whether it worked. Collective.
template <typename Write>
bool written_by_rank0(Write&& write) {
  bool ok = true;
  if (world_rank() == 0) {
    try {
      write();
    } catch (...) {
      ok = false;
    }
  }
  return all_ranks(ok);
}

// Trains with the model built for the data (as `ringtrain train` does); returns the final
// parameters and, on rank 0, the manifest.
RunOutput train_data(TrainConfig config, const std::filesystem::path& data,
                     nlohmann::json* manifest = nullptr) {
  const std::filesystem::path run = data.parent_path() / ("run-" + data.filename().string());
  config.data_dir = data.string();
  config.run_dir = run.string();
  collectives::Communicator comm(MPI_COMM_WORLD);
  Trainer trainer(
      config,
      [&config](const data::DataInfo& d) { return model_of(config, d.sample_shape, d.outputs()); },
      comm);
  RunOutput out;
  out.results = trainer.run();
  const auto p = trainer.model().parameters().values();
  out.parameters.assign(p.begin(), p.end());
  if (manifest && world_rank() == 0)
    *manifest = nlohmann::json::parse(std::ifstream(run / "manifest.json"));
  return out;
}

TrainConfig small_run(const std::string& model) {
  TrainConfig config = small_config(model, 6, 4);
  config.mlp_hidden = "16";
  config.evaluate = true;
  config.eval_every = 3;
  return config;
}

}  // namespace

TEST_CASE("the same data as IDX, .npy and HDF5 train to bitwise the same model", "[train][data]") {
  const auto dir = shared_temp_dir("ringtrain-userdata");
  const SmallData data;
  REQUIRE(written_by_rank0([&] {
    data.write_idx_dir(dir / "idx");
    data.write_npy_dir(dir / "npy");
    test::write_h5(dir / "contiguous.h5", data.h5_arrays(false));
    test::write_h5(dir / "chunked.h5", data.h5_arrays(true));
  }));
  const TrainConfig config = small_run("mlp");
  nlohmann::json manifest;
  const RunOutput idx = train_data(config, dir / "idx");
  const RunOutput npy = train_data(config, dir / "npy", &manifest);
  const RunOutput contiguous = train_data(config, dir / "contiguous.h5");
  const RunOutput chunked = train_data(config, dir / "chunked.h5");

  Facts facts;
  facts.check(!idx.parameters.empty(), "no parameters");
  facts.check(bitwise_equal(npy.parameters, idx.parameters), ".npy model differs from IDX");
  facts.check(bitwise_equal(contiguous.parameters, idx.parameters), "mapped HDF5 model differs");
  facts.check(bitwise_equal(chunked.parameters, idx.parameters), "chunked HDF5 model differs");
  facts.check(npy.results.final_test_metric == idx.results.final_test_metric,
              "test accuracy differs");
  if (world_rank() == 0) {
    const auto& d = manifest["data"];
    facts.check(d["layout"] == "npy" && d["path"] == (dir / "npy").string(), d.dump());
    facts.check(d["sample_shape"] == nlohmann::json({1, 28, 28}) && d["classes"] == 10, d.dump());
    facts.check(d["arrays"][0]["dtype"] == "uint8" && d["arrays"][1]["dtype"] == "int64" &&
                    d["arrays"][0]["shape"] == nlohmann::json({13, 1, 28, 28}) &&
                    d["arrays"][0]["mapped"] == true,
                d["arrays"].dump());
    std::filesystem::remove_all(dir);
  }
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("a cnn is built for the data's (C, H, W) samples and classes", "[train][data]") {
  const auto dir = shared_temp_dir("ringtrain-userdata");
  // 10 train and 6 test samples of (3, 9, 10) float32, 5 classes
  const auto x = [](std::uint64_t n) {
    std::vector<float> v(n * 3 * 9 * 10);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = float((i * 7919) % 113) / 113.0f - 0.5f;
    return npy_bytes("<f4", {n, 3, 9, 10}, le_bytes(v));
  };
  const auto y = [](std::uint64_t n) {
    std::vector<std::int32_t> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = std::int32_t(i % 5);
    return npy_bytes("<i4", {n}, le_bytes(v));
  };
  REQUIRE(written_by_rank0([&] {
    std::filesystem::create_directories(dir / "npy");
    write_plain(dir / "npy" / "train_x.npy", x(10));
    write_plain(dir / "npy" / "train_y.npy", y(10));
    write_plain(dir / "npy" / "test_x.npy", x(6));
    write_plain(dir / "npy" / "test_y.npy", y(6));
  }));
  TrainConfig config = small_run("cnn");
  nlohmann::json manifest;
  const RunOutput run = train_data(config, dir / "npy", &manifest);

  // conv 3→32 (5x5), conv 32→64 (5x5), linear 64·2·2→1024, linear 1024→5, with biases
  const std::size_t expected =
      (3 * 25 * 32 + 32) + (32 * 25 * 64 + 64) + (256 * 1024 + 1024) + (1024 * 5 + 5);
  Facts facts;
  facts.check(run.parameters.size() == expected, "parameters " +
                                                     std::to_string(run.parameters.size()) +
                                                     ", expected " + std::to_string(expected));
  facts.check(run.results.steps == 6, "steps " + std::to_string(run.results.steps));
  if (world_rank() == 0) {
    facts.check(manifest["data"]["sample_shape"] == nlohmann::json({3, 9, 10}) &&
                    manifest["data"]["classes"] == 5 &&
                    manifest["data"]["arrays"][0]["dtype"] == "float32",
                manifest["data"].dump());
    std::filesystem::remove_all(dir);
  }
  REQUIRE_ALL_RANKS(facts);
}
