// --reduction exact: N ranks, with any split of the global batch into multiples of the
// micro-batch, train bitwise what one process trains (/model and /optimizer of the final
// checkpoint, BatchNorm's running statistics included), with SGD and AdamW, for an mlp, a
// small cnn (both convolution algorithms) and that cnn with SyncBN; sum-scaled at the same
// uneven splits does not; the exact update is the sum-scaled update (close to it at N = 1);
// the refusals, a node short of memory for the kept terms among them.
// The one-process reference runs on MPI_COMM_SELF on every rank, as in equivalence_test.cpp.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <hdf5.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mpi_test.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/layers/conv2d.hpp"
#include "ringtrain/models/registry.hpp"
#include "train/sum/exact_step.hpp"
#include "train_rig.hpp"

using namespace ringtrain;
using namespace ringtrain::testing;

namespace {

constexpr std::uint64_t kSteps = 20;
constexpr std::uint64_t kLogEvery = 5;  // metrics windows: 4 logged losses per run

// A model and how its global batch is cut: every split below is in multiples of m.
struct Case {
  std::string model;
  std::size_t global_batch;
  std::size_t micro_batch;
  float dropout;  // --dropout (0 for a spec file, which carries its own dropout layer)
  std::string mlp_hidden;  // --mlp-hidden for the mlp ("" for a spec file)
  SyncBn sync_bn = SyncBn::kAuto;
  std::uint64_t steps = kSteps;
};

// mlp: 48 samples in micro-batches of 4; hidden widths that are not multiples of the
// kernels' blocks (tails in every product), and a tenth of the default mlp's cost.
Case mlp_case() { return {"mlp", 48, 4, 0.1f, "200,72"}; }

// The small cnn of exact_cnn.toml (im2col, then Winograd): 72 samples in micro-batches of 6,
// not a multiple of Winograd's groups of 4, so a micro-batch's groups are 1 or 2 images.
Case cnn_case() { return {RINGTRAIN_EXACT_CNN_SPEC, 72, 6, 0.0f, ""}; }

// The same cnn with BatchNorm after each convolution and after the hidden linear layer
// (exact_cnn_bn.toml), run with --sync-bn on: the statistics are exact sums inside the layers.
// 10 steps: each BatchNorm layer adds three small collectives per step, slow at N = 4 on two
// cores (ranks busy-poll), and the entry must stay short.
Case bn_case() { return {RINGTRAIN_EXACT_CNN_BN_SPEC, 72, 6, 0.0f, "", SyncBn::kOn, 10}; }

// Splits of the global batch into multiples of m over N ranks: uneven, one of them with an
// empty rank (N = 4). Both cases hold 12 micro-batches: m·(1, 11), m·(2, 3, 7), m·(1, 0, 5, 6).
std::string uneven_split(const Case& c, int n) {
  const std::size_t m = c.micro_batch, units = c.global_batch / m;
  switch (n) {
    case 1:
      return fmt::format("{}", c.global_batch);
    case 2:
      return fmt::format("{},{}", m, (units - 1) * m);
    case 3:
      return fmt::format("{},{},{}", 2 * m, 3 * m, (units - 5) * m);
    default:
      return fmt::format("{},0,{},{}", m, 5 * m, (units - 6) * m);
  }
}

TrainConfig exact_config(const Case& c, OptimizerKind optimizer) {
  TrainConfig config = small_config(c.model, c.steps, c.global_batch);
  config.reduction = Reduction::kExact;
  config.exact_micro_batch = c.micro_batch;
  config.optimizer = optimizer;
  config.lr = optimizer == OptimizerKind::kSgd ? 0.05f : 0.001f;
  config.log_every = kLogEvery;
  config.dropout = c.dropout;  // masks keyed by global sample index: the split must not matter
  if (!c.mlp_hidden.empty()) config.mlp_hidden = c.mlp_hidden;
  config.sync_bn = c.sync_bn;
  return config;
}

// Every dataset under `group` of an HDF5 file, by path, as raw bytes.
using Arrays = std::map<std::string, std::vector<char>>;
herr_t collect(hid_t group, const char* name, const H5O_info_t* info, void* out) {
  if (info->type != H5O_TYPE_DATASET) return 0;
  const hid_t set = H5Dopen2(group, name, H5P_DEFAULT);
  const hid_t type = H5Dget_type(set);
  const hid_t space = H5Dget_space(set);
  std::vector<char> bytes(static_cast<std::size_t>(H5Sget_simple_extent_npoints(space)) *
                          H5Tget_size(type));
  if (!bytes.empty()) H5Dread(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data());
  (*static_cast<Arrays*>(out))[name] = std::move(bytes);
  H5Sclose(space);
  H5Tclose(type);
  H5Dclose(set);
  return 0;
}

Arrays read_group(const std::filesystem::path& file, const std::string& group) {
  Arrays arrays;
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return arrays;
  const hid_t g = H5Gopen2(f, group.c_str(), H5P_DEFAULT);
  if (g >= 0) {
    H5Ovisit2(g, H5_INDEX_NAME, H5_ITER_INC, collect, &arrays, H5O_INFO_BASIC);
    H5Gclose(g);
  }
  H5Fclose(f);
  return arrays;
}

// A run and its final checkpoint's /model and /optimizer, and manifest.json's
// optimizer_state (empty on ranks that write nothing).
struct Finished {
  RunOutput run;
  Arrays model, optimizer;
  nlohmann::json state;
  std::vector<double> losses;  // metrics.jsonl's "loss" of every window
};

Finished train_and_read(const TrainConfig& config, MPI_Comm comm) {
  Finished out;
  out.run = train_on(config, comm, [&](const std::filesystem::path& dir) {
    const std::filesystem::path latest = dir / "checkpoints" / "LATEST";
    if (!std::filesystem::exists(latest)) return;
    std::ifstream in(latest);
    std::string name;
    in >> name;
    out.model = read_group(dir / "checkpoints" / name, "/model");
    out.optimizer = read_group(dir / "checkpoints" / name, "/optimizer");
    out.state = nlohmann::json::parse(std::ifstream(dir / "manifest.json"))["optimizer_state"];
    std::ifstream metrics(dir / "metrics.jsonl");
    for (std::string line; std::getline(metrics, line);) {
      const nlohmann::json record = nlohmann::json::parse(line);
      if (record.contains("loss")) out.losses.push_back(record["loss"]);
    }
  });
  return out;
}

void check_bitwise(const Case& c, OptimizerKind optimizer) {
  const int n = world_size();
  const TrainConfig config = exact_config(c, optimizer);
  const Finished reference = train_and_read(config, MPI_COMM_SELF);
  REQUIRE(all_ranks(!reference.model.empty() && !reference.optimizer.empty()));
  // With BatchNorm, /model holds the running statistics: compared below with the rest.
  const bool batch_norm = model_of(config)->has_batch_norm();
  REQUIRE(all_ranks(!batch_norm || std::any_of(reference.model.begin(), reference.model.end(),
                                               [](const auto& array) {
                                                 return array.first.find("running_var") !=
                                                        std::string::npos;
                                               })));
  const RunOutput first_step = [&] {
    TrainConfig one = config;
    one.steps = 1;
    return train_on(one, MPI_COMM_SELF);
  }();
  REQUIRE(all_ranks(relative_difference(reference.run.parameters, first_step.parameters) > 1e-3));

  for (const std::string& split : {std::string(), uneven_split(c, n)}) {
    INFO(fmt::format("{}, {}, N = {}, local batches '{}'", c.model, name_of(optimizer), n, split));
    TrainConfig distributed = config;
    distributed.local_batches = split;
    const Finished run = train_and_read(distributed, MPI_COMM_WORLD);
    REQUIRE(all_ranks(bitwise_equal(run.run.parameters, reference.run.parameters)));
    // Rank 0 of the N-rank run wrote its checkpoint; the other ranks have none to compare.
    const bool writer = world_rank() == 0;
    REQUIRE(all_ranks(!writer || run.model == reference.model));
    REQUIRE(all_ranks(!writer || run.optimizer == reference.optimizer));
    // The logged losses too: summed exactly over micro-batches and ranks.
    INFO(fmt::format("losses {:.17g} against one process's {:.17g}", fmt::join(run.losses, " "),
                     fmt::join(reference.losses, " ")));
    REQUIRE(all_ranks(!writer || (run.losses.size() == config.steps / kLogEvery &&
                                  bitwise_equal(run.losses, reference.losses))));
  }
}

}  // namespace

TEST_CASE("exact, SGD: N ranks, even and uneven splits, train bitwise what one process trains",
          "[mlp]") {
  check_bitwise(mlp_case(), OptimizerKind::kSgd);
}

TEST_CASE("exact, AdamW: N ranks, even and uneven splits, train bitwise what one process trains",
          "[mlp]") {
  check_bitwise(mlp_case(), OptimizerKind::kAdamw);
}

// The cnn case covers both convolution algorithms: its second convolution runs Winograd.
TEST_CASE("exact cnn: the test model has an im2col and a Winograd convolution", "[cnn]") {
  const TrainConfig config = exact_config(cnn_case(), OptimizerKind::kSgd);
  const std::unique_ptr<Sequential> model = model_of(config);
  model->plan(models::input_shape(), config.exact_micro_batch);
  const auto* first = dynamic_cast<const Conv2d*>(&model->layer(0));
  const auto* second = dynamic_cast<const Conv2d*>(&model->layer(3));
  REQUIRE(first != nullptr);
  REQUIRE(second != nullptr);
  CHECK(first->algorithm_name() == "im2col");
  CHECK(second->algorithm_name().find("winograd") == 0);
}

TEST_CASE("exact cnn, SGD: N ranks, even and uneven splits, train bitwise what one process "
          "trains", "[cnn]") {
  check_bitwise(cnn_case(), OptimizerKind::kSgd);
}

TEST_CASE("exact cnn, AdamW: N ranks, even and uneven splits, train bitwise what one process "
          "trains", "[cnn]") {
  check_bitwise(cnn_case(), OptimizerKind::kAdamw);
}

// cnn-bn: SyncBN after an im2col and a Winograd convolution and after a linear layer; rank 1
// of the uneven split at N = 4 holds no sample and still takes part in every statistic.
TEST_CASE("exact cnn-bn, SGD and AdamW: N ranks, even and uneven splits, train bitwise what one "
          "process trains", "[bn]") {
  for (OptimizerKind optimizer : {OptimizerKind::kSgd, OptimizerKind::kAdamw})
    check_bitwise(bn_case(), optimizer);
}

namespace {

// Whether manifest.json's optimizer_state says the state was sharded over the N ranks: the
// ranks' bytes sum to the unsharded bytes, and with N > 1 no rank holds all of them.
bool sharded_state(const nlohmann::json& state, int n) {
  const std::size_t full = state["unsharded_bytes"];
  std::size_t sum = 0, largest = 0;
  for (std::size_t b : state["bytes_per_rank"]) {
    sum += b;
    largest = std::max(largest, b);
  }
  return full > 0 && sum == full && (n == 1 || largest < full);
}

// --zero 1 after the exact sum: each rank updates its shard of the rounded total with its
// shard of the optimizer state, then the all-gathers. The parameters and the final checkpoint
// (its state gathered into the unsharded layout) equal byte for byte those of one process
// without ZeRO and of the N-rank exact run without ZeRO, at an even and an uneven split.
void check_zero_bitwise(OptimizerKind optimizer) {
  const int n = world_size();
  const TrainConfig config = exact_config(mlp_case(), optimizer);
  const Finished reference = train_and_read(config, MPI_COMM_SELF);
  REQUIRE(all_ranks(!reference.model.empty() && !reference.optimizer.empty()));

  for (const std::string& split : {std::string(), uneven_split(mlp_case(), n)}) {
    INFO(fmt::format("{}, N = {}, local batches '{}'", name_of(optimizer), n, split));
    TrainConfig unsharded = config;
    unsharded.local_batches = split;
    unsharded.zero = ZeroChoice::kOff;
    TrainConfig sharded = unsharded;
    sharded.zero = ZeroChoice::kOn;
    const Finished plain = train_and_read(unsharded, MPI_COMM_WORLD);
    const Finished zero = train_and_read(sharded, MPI_COMM_WORLD);
    REQUIRE(all_ranks(bitwise_equal(zero.run.parameters, reference.run.parameters)));
    REQUIRE(all_ranks(bitwise_equal(zero.run.parameters, plain.run.parameters)));
    if (n >= kOverlapFromRanks) {  // words after backward: each rank rounds only its shard
      TrainConfig after_backward = sharded;
      after_backward.overlap = Overlap::kOff;
      const RunOutput own_chunk = train_on(after_backward, MPI_COMM_WORLD);
      REQUIRE(all_ranks(bitwise_equal(own_chunk.parameters, reference.run.parameters)));
    }
    const bool writer = world_rank() == 0;
    REQUIRE(all_ranks(!writer || sharded_state(zero.state, n)));
    REQUIRE(all_ranks(!writer || (zero.model == reference.model && zero.model == plain.model)));
    REQUIRE(all_ranks(!writer || (zero.optimizer == reference.optimizer &&
                                  zero.optimizer == plain.optimizer)));
  }
}

}  // namespace

// The shard of --zero 1 on the ring is the rank's chunk of the words (one bucket), so a step
// whose words are summed after backward rounds only it (check_zero_bitwise: the same bits).
TEST_CASE("exact --zero 1 on the ring: each rank's shard is its chunk of the words", "[zero]") {
  const collectives::Communicator comm;
  auto model = models::make_model("mlp", models::ModelOptions{{24, 16}, 0.0f});
  model->plan(models::input_shape(), 4);
  for (const bool zero : {false, true}) {
    ReducerOptions options;
    options.zero = zero;
    const ExactGradientSum sum(comm, *model, options, 4, nullptr);
    INFO("--zero " << zero << ", N = " << comm.size());
    CHECK(all_ranks(sum.shard_is_chunk() == (zero && comm.size() > 1)));
  }
}

TEST_CASE("exact --zero 1, SGD (momentum): N ranks, even and uneven splits, bitwise one process",
          "[zero]") {
  check_zero_bitwise(OptimizerKind::kSgd);
}

TEST_CASE("exact --zero 1, AdamW: N ranks, even and uneven splits, bitwise one process", "[zero]") {
  check_zero_bitwise(OptimizerKind::kAdamw);
}

// --overlap on (the default, every test above) starts each layer's words' sum over ranks
// once its backward is done (from kOverlapFromRanks ranks on); --overlap off sums them all
// after backward, on the ring. The same bits, at the uneven split as well.
TEST_CASE("exact: words summed during backward (--overlap on) give --overlap off's bits", "[mlp]") {
  const Case c = mlp_case();
  TrainConfig config = exact_config(c, OptimizerKind::kSgd);
  config.local_batches = uneven_split(c, world_size());
  config.overlap = Overlap::kOff;
  const RunOutput after = train_on(config, MPI_COMM_WORLD);
  config.overlap = Overlap::kOn;
  const RunOutput during = train_on(config, MPI_COMM_WORLD);
  REQUIRE(
      all_ranks(!during.parameters.empty() && bitwise_equal(during.parameters, after.parameters)));
}

// The tests above can fail: a float sum at the same uneven split differs in the last bits (N > 1),
// and the exact update is the sum-scaled one, rounded differently (N = 1, lr 0.002 as in
// equivalence_test.cpp, where an ulp does not grow in 20 steps).
namespace {

void check_sum_scaled_differs(const Case& c) {
  INFO(c.model);
  TrainConfig config = exact_config(c, OptimizerKind::kSgd);
  config.reduction = Reduction::kSumScaled;
  config.dropout = 0.0f;
  config.lr = 0.002f;
  const RunOutput float_reference = train_on(config, MPI_COMM_SELF);
  config.reduction = Reduction::kExact;
  const RunOutput exact_reference = train_on(config, MPI_COMM_SELF);
  const double rel = relative_difference(exact_reference.parameters, float_reference.parameters);
  INFO("exact vs sum-scaled at N = 1: " << rel);
  REQUIRE(all_ranks(rel <= 1e-5));

  if (world_size() == 1) return;
  config.reduction = Reduction::kSumScaled;
  config.local_batches = uneven_split(c, world_size());
  const RunOutput split = train_on(config, MPI_COMM_WORLD);
  INFO("sum-scaled at N vs N = 1: " << relative_difference(split.parameters,
                                                           float_reference.parameters));
  REQUIRE(all_ranks(!bitwise_equal(split.parameters, float_reference.parameters)));
}

}  // namespace

TEST_CASE("sum-scaled at the same uneven split is not bitwise one process; exact is its update",
          "[mlp]") {
  check_sum_scaled_differs(mlp_case());
}

TEST_CASE("cnn: sum-scaled at the same uneven split is not bitwise one process; exact is its "
          "update", "[cnn]") {
  check_sum_scaled_differs(cnn_case());
}

TEST_CASE("cnn-bn: SyncBN sum-scaled at the same uneven split is not bitwise one process; exact "
          "is its update", "[bn]") {
  check_sum_scaled_differs(bn_case());
}

namespace {

// The message of the UsageError a run of `config` on every rank throws (empty if none).
std::string refusal(const TrainConfig& config) {
  try {
    train_on(config, MPI_COMM_WORLD);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("exact: splits that are not multiples of m and unsupported options are refused",
          "[mlp]") {
  const int n = world_size();
  TrainConfig config = exact_config(mlp_case(), OptimizerKind::kSgd);
  config.steps = 2;
  // N = 1: 48 is not a multiple of 5; N > 1: rank 0 holds 2 samples (and rank 1 46 − 4·(N−2)).
  config.local_batches = n == 1 ? "" : fmt::format("2,{}", 46 - 4 * (n - 2));
  for (int r = 2; r < n; ++r) config.local_batches += ",4";
  if (n == 1) config.exact_micro_batch = 5;
  const std::string split = refusal(config);
  INFO(split);
  REQUIRE(all_ranks(split.find("must be a multiple of --exact-micro-batch") != std::string::npos));
  REQUIRE(all_ranks(split.find(n == 1 ? "rank 0's is 48" : "rank 0's is 2") != std::string::npos));

  config = exact_config(mlp_case(), OptimizerKind::kSgd);
  config.steps = 2;
  config.wire = collectives::Wire::kBf16;
  REQUIRE(all_ranks(refusal(config).find("does not support --wire bf16") != std::string::npos));
  config.wire = collectives::Wire::kFp32;
  config.collective = CollectiveKind::kMpi;
  REQUIRE(all_ranks(refusal(config).find("does not support --collective") != std::string::npos));
  config.collective = CollectiveKind::kRing;
  config.bucket_bytes = 4096;
  REQUIRE(all_ranks(refusal(config).find("does not support --bucket-bytes") != std::string::npos));
  config.bucket_bytes = 0;
  config.blas_threads = 2;
  REQUIRE(all_ranks(refusal(config).find("does not support --blas-threads") != std::string::npos));
  config.blas_threads = 1;
  config.exact_micro_batch = 0;
  REQUIRE(all_ranks(refusal(config).find("--exact-micro-batch 0") != std::string::npos));
  config.exact_micro_batch = mlp_case().micro_batch;
  config.model = "cnn-bn";  // exact supports its BatchNorm with SyncBN only
  config.sync_bn = SyncBn::kOff;
  const std::string per_rank = refusal(config);
  INFO(per_rank);
  REQUIRE(all_ranks(per_rank.find("--reduction exact with --sync-bn off") != std::string::npos));
}
