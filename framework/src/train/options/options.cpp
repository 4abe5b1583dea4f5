// The table of `ringtrain train`'s options (see options.hpp), and its rows for the data, the
// model, the optimizer, the parallelism and the buckets; run_options.cpp holds the others,
// option_rows.hpp the builders; config_toml.cpp reads --config.
#include "ringtrain/framework/train/options.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <type_traits>

#include "ringtrain/files/escape.hpp"
#include "ringtrain/framework/data/sampler.hpp"
#include "ringtrain/framework/error.hpp"
#include "train/options/option_rows.hpp"
#include "train/sum/exact_step.hpp"

namespace ringtrain {
using namespace option_rows;  // the row builders, and the rows of run_options.cpp
namespace {

std::vector<TrainOption> data_and_model_options();
std::vector<TrainOption> optimizer_options();
std::vector<TrainOption> parallel_options();
std::vector<TrainOption> bucket_options();

std::vector<TrainOption> make_table() {
  std::vector<TrainOption> table;
  for (auto part : {data_and_model_options, optimizer_options, parallel_options, bucket_options,
                    run_options, checkpoint_options, safety_options, split_options})
    for (TrainOption& o : part()) {
      const bool numeric = o.kind == ValueKind::kWhole || o.kind == ValueKind::kReal;
      if (numeric && !(o.minimum < o.maximum))
        throw std::logic_error("option --" + o.name + " has no range (options.cpp: ranged)");
      table.push_back(std::move(o));
    }
  return table;
}

}  // namespace

bool TrainOption::names_file(std::string_view text) const {
  if (text.empty() || path == PathRule::kNone) return false;
  return path == PathRule::kPath || (text.size() > 5 && text.ends_with(".toml"));
}

std::string TrainOption::default_text() const {
  return json_to_text(get(TrainConfig{}));
}

std::span<const TrainOption> train_options() {
  static const std::vector<TrainOption> table = make_table();
  return table;
}

const TrainOption* find_train_option(std::string_view name) {
  for (const TrainOption& o : train_options())
    if (o.name == name) return &o;
  return nullptr;
}

std::string json_to_text(const nlohmann::json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

namespace {

// --------------------------------------------------------------------------------------
// The rows. Checks name the flag and the value, and say what to do instead.

std::vector<TrainOption> data_and_model_options() {
  return {
      path(option("data", &TrainConfig::data_dir,
                  "IDX folder (default: the Debian package dataset-fashion-mnist), HDF5 file "
                  "with /train/x /train/y /test/x /test/y, or folder of train_x.npy "
                  "train_y.npy test_x.npy test_y.npy")),
      ranged(
          option("data-memory-limit", &TrainConfig::data_memory_limit,
                 "bytes the data may hold in memory (samples as floats, labels); contiguous HDF5 "
                 "and .npy samples are mapped and do not count, other data over it are refused "
                 "(0: this machine's memory)"),
          0, 0x1p50),
      path(option("model", &TrainConfig::model,
                  "mlp | cnn | cnn-bn | FILE.toml (a [[layers]] list; see `ringtrain model`)"),
           PathRule::kTomlFile),
      list(option("mlp-hidden", &TrainConfig::mlp_hidden, "hidden widths of mlp",
                  [](const TrainConfig& c, int) {
                    for (std::size_t w : parse_size_list(c.mlp_hidden, "--mlp-hidden"))
                      require(w > 0, "--mlp-hidden " + c.mlp_hidden + ": widths must be > 0");
                  })),
      ranged(option("dropout", &TrainConfig::dropout, "dropout probability after hidden layers",
                    [](const TrainConfig& c, int) {
                      require(c.dropout >= 0.0f && c.dropout < 1.0f,
                              fmt::format("--dropout {} must be in [0, 1)", c.dropout));
                    }),
             0, 1),
      option("conv-algorithm", &TrainConfig::conv_algorithm,
             "how 5x5 stride-1 convolutions run (auto: Winograd F(4x4, 5x5) from 8 channels)"),
      option("loss", &TrainConfig::loss,
             "auto: cross-entropy for integer class labels, mse (squared error; test MSE is "
             "the metric) for float32 targets; a loss that does not fit y is refused"),
      ranged(option("validation-fraction", &TrainConfig::validation_fraction,
                    "fraction of the training samples held out by the seed for validation: "
                    "best, --target and the stopping rule then use it, and the test set is "
                    "evaluated at the best step and at the end (0: none, they use the test set)",
                    [](const TrainConfig& c, int) {
                      require(c.validation_fraction >= 0.0 && c.validation_fraction < 1.0,
                              fmt::format("--validation-fraction {} must be in [0, 1)",
                                          c.validation_fraction));
                    }),
             0, 1),
      ranged(option("global-batch", &TrainConfig::global_batch, "samples per step over all ranks",
                    [](const TrainConfig& c, int) {
                      require(c.global_batch > 0,
                              "--global-batch 0: a step needs at least one sample");
                    }),
             1, 0x1p24),
      list(option("local-batches", &TrainConfig::local_batches,
                  "explicit per-rank split b0,b1,... summing to the global batch, or auto: the "
                  "split follows each rank's measured compute speed (see --rebalance-every)",
                  [](const TrainConfig& c, int world_size) {
                    c.first_split(static_cast<std::size_t>(world_size));
                  })),
      ranged(option("steps", &TrainConfig::steps, "number of steps (overrides --epochs)"), 0,
             0x1p40),
      ranged(option("epochs", &TrainConfig::epochs, "epochs over the training set",
                    [](const TrainConfig& c, int) {
                      require(
                          c.steps > 0 || c.epochs > 0,
                          fmt::format("--epochs {}: give --steps S or --epochs E > 0", c.epochs));
                      require(std::isfinite(c.epochs) && c.epochs >= 0,
                              fmt::format("--epochs {} must be >= 0", c.epochs));
                    }),
             0, 1e6),
  };
}

std::vector<TrainOption> optimizer_options() {
  return {
      option("optimizer", &TrainConfig::optimizer, "",
             [](const TrainConfig& c, int) { validate(c.optimizer_config()); }),
      ranged(option("lr", &TrainConfig::lr, "learning rate for global batch 128 (see --lr-scaling)",
                    [](const TrainConfig& c, int) {
                      require(std::isfinite(c.lr) && c.lr > 0,
                              fmt::format("--lr {}: the learning rate must be > 0", c.lr));
                    }),
             0, 1000),
      ranged(option("momentum", &TrainConfig::momentum, "SGD momentum"), 0, 1),
      option("nesterov", &TrainConfig::nesterov, "Nesterov momentum"),
      ranged(option("weight-decay", &TrainConfig::weight_decay,
                    "weight decay (SGD: coupled, AdamW: decoupled)"),
             0, 1000),
      ranged(option("beta1", &TrainConfig::beta1, "AdamW beta1"), 0, 1),
      ranged(option("beta2", &TrainConfig::beta2, "AdamW beta2"), 0, 1),
      ranged(option("eps", &TrainConfig::eps, "AdamW epsilon"), 0, 1),
      option("schedule", &TrainConfig::schedule, "",
             [](const TrainConfig& c, int) {
               validate(c.schedule_config(c.steps > 0 ? c.steps : c.warmup_steps + 1000000));
             }),
      ranged(option("warmup-steps", &TrainConfig::warmup_steps, "linear warmup steps"), 0, 0x1p40),
      ranged(option("step-size", &TrainConfig::step_size,
                    "schedule=step: steps between decays (0: a third of the run)"),
             0, 0x1p40),
      ranged(option("gamma", &TrainConfig::gamma, "schedule=step: decay factor"), 0, 1000),
      ranged(option("min-lr", &TrainConfig::min_lr, "schedule=cosine: final learning rate"), 0,
             1000),
      option("lr-scaling", &TrainConfig::lr_scaling, "scale --lr with the global batch"),
      ranged(option("seed", &TrainConfig::seed, "seed of initialisation, data order and dropout"),
             0, 0x1p64),
  };
}

// --reduction exact (exact_step.hpp): every local batch a whole number of micro-batches, not
// per-rank BatchNorm (--sync-bn off), and none of the options whose sums the exact step does
// not make exact yet.
void check_exact(const TrainConfig& c, int world_size) {
  const std::size_t m = c.exact_micro_batch;
  require(m > 0, "--exact-micro-batch 0: a micro-batch holds at least one sample");
  if (c.reduction != Reduction::kExact) return;
  const auto world = static_cast<std::size_t>(world_size);
  const std::vector<std::size_t> batches = c.first_split(world);
  for (std::size_t r = 0; r < batches.size(); ++r)
    require(batches[r] % m == 0,
            fmt::format("--reduction exact: every local batch must be a multiple of "
                        "--exact-micro-batch {}, but rank {}'s is {} (--global-batch {} over {} "
                        "ranks{}); choose --local-batches or --exact-micro-batch to fit",
                        m, r, batches[r], c.global_batch, world_size,
                        c.local_batches.empty() ? "" : ", --local-batches " + c.local_batches));
  require((c.global_batch + m - 1) / m <= kExactMaxMicroBatches,
          fmt::format("--reduction exact: --global-batch {} is {} micro-batches of {}; at most "
                      "{} (the exact accumulator's term limit): raise --exact-micro-batch",
                      c.global_batch, (c.global_batch + m - 1) / m, m, kExactMaxMicroBatches));
  const char* unsupported = c.wire != collectives::Wire::kFp32 ? "--wire bf16"
                            : c.collective != CollectiveKind::kRing
                                ? "--collective mpi or hierarchical"
                            : c.bucket_bytes != 0              ? "--bucket-bytes"
                            : c.overlap == Overlap::kAlternate ? "--overlap alternate"
                            : c.blas_threads > 1               ? "--blas-threads above 1"
                                                               : nullptr;
  require(c.sync_bn != SyncBn::kOff,
          "--reduction exact with --sync-bn off: exact promises the update one process computes "
          "on the whole batch, and BatchNorm statistics per rank are not that update; use "
          "--sync-bn on (or auto)");
  require(unsupported == nullptr,
          fmt::format("--reduction exact does not support {} yet: the exact step sums the whole "
                      "gradient in one exact allreduce after backward, with the BLAS on one "
                      "thread and in fp32; drop the option",
                      unsupported ? unsupported : ""));
}

std::vector<TrainOption> parallel_options() {
  return {
      option("reduction", &TrainConfig::reduction,
             "mean-of-means is wrong on purpose, for teaching; exact: sum-scaled, bitwise the "
             "same update for any N and any split into multiples of --exact-micro-batch"),
      ranged(option("exact-micro-batch", &TrainConfig::exact_micro_batch,
                    "--reduction exact: samples per micro-batch m; every local batch must be a "
                    "multiple of m",
                    check_exact),
             0, 0x1p20),
      option("sync-bn", &TrainConfig::sync_bn, "BatchNorm statistics over all ranks"),
      ranged(option("blas-threads", &TrainConfig::blas_threads,
                    "OpenBLAS threads per rank (0: cores per node / ranks per node)",
                    [](const TrainConfig& c, int) {
                      require(c.blas_threads >= 0,
                              fmt::format("--blas-threads {} must be >= 0 (0: automatic)",
                                          c.blas_threads));
                    }),
             0, 1024),
      option("gemm", &TrainConfig::gemm,
             "who runs the Linear layers' products (own: ringtrain's AVX-512 kernels, or AVX2 "
             "ones on a CPU without AVX-512, the same bits at any --blas-threads; auto: own on "
             "Intel AVX-512 and AMD Zen 5)"),
      option("collective", &TrainConfig::collective,
             "our ring, MPI_Allreduce, or hierarchical: reduce-scatter within each host, a "
             "ring across hosts, all-gather within each host"),
      ranged(option("ranks-per-host", &TrainConfig::ranks_per_host,
                    "--collective hierarchical: ranks [hK, (h+1)K) form host h, so one machine can "
                    "emulate hosts (0: the hosts MPI reports)",
                    [](const TrainConfig& c, int) {
                      require(
                          c.ranks_per_host >= 0,
                          fmt::format("--ranks-per-host {} must be >= 0 (0: the hosts MPI reports)",
                                      c.ranks_per_host));
                      require(
                          c.ranks_per_host == 0 || c.collective == CollectiveKind::kHierarchical,
                          fmt::format("--ranks-per-host {} groups ranks for --collective "
                                      "hierarchical only",
                                      c.ranks_per_host));
                    }),
             0, 0x1p20),
      option("wire", &TrainConfig::wire,
             "gradients cross the wire as fp32, or as bf16 (half the bytes: rounded to nearest "
             "even, added in fp32, each rank's rounding losses fed into its next gradient)",
             [](const TrainConfig& c, int) {
               require(c.wire == collectives::Wire::kFp32 || c.collective != CollectiveKind::kMpi,
                       "--wire bf16 is done by the ring: it needs --collective ring or "
                       "hierarchical (which rounds between hosts only)");
             }),
  };
}

// The gradient sum's buckets and overlap, the trace, ZeRO.
std::vector<TrainOption> bucket_options() {
  return {
      ranged(
          option("bucket-bytes", &TrainConfig::bucket_bytes,
                 "gradient bucket cap in bytes (0: the default rule from the ring's alpha-B model, "
                 "printed at start)",
                 [](const TrainConfig& c, int) {
                   require(c.bucket_bytes == 0 || c.bucket_bytes >= 4,
                           fmt::format("--bucket-bytes {}: a bucket holds at least one float (4 "
                                       "bytes); 0 picks the default",
                                       c.bucket_bytes));
                 }),
          0, 0x1p40),
      option("overlap", &TrainConfig::overlap,
             "start a bucket's ring during backward as soon as its gradients are written, or "
             "reduce after backward; alternate: on in even steps, off in odd ones, to measure "
             "what overlap buys step by step (the update is bitwise the same)"),
      option("ring-driver", &TrainConfig::poll_driver,
             "rings advance between layers on the main thread, or on a polling thread"),
      path(option("cost-model", &TrainConfig::cost_model,
                  "JSON of `ringtrain bench allreduce --json` whose alpha-B fit sets the default "
                  "bucket cap",
                  [](const TrainConfig& c, int) {
                    require(c.cost_model.empty() || std::filesystem::is_regular_file(c.cost_model),
                            "--cost-model " + c.cost_model +
                                ": no such file (write one with `ringtrain bench allreduce --json "
                                "FILE`)");
                  })),
      ranged(option("trace-steps", &TrainConfig::trace_steps,
                    "steps recorded in trace.json (0: no trace)"),
             0, 10000),
      option("bucket-update", &TrainConfig::bucket_update,
             "update each bucket as soon as it is summed"),
      ranged(option("segments-in-flight", &TrainConfig::segments_in_flight,
                    "ring messages posted ahead per ring step while overlapping (0: the measured "
                    "default, 2, as blocking rings post)",
                    [](const TrainConfig& c, int) {
                      require(c.segments_in_flight <= 64,
                              fmt::format(
                                  "--segments-in-flight {}: at most 64 (each takes two segments "
                                  "of scratch per ring); 0 picks the default",
                                  c.segments_in_flight));
                    }),
             0, 64),
      option("zero", &TrainConfig::zero,
             "1 shards the optimizer state over ranks (ZeRO-1): each rank updates its shard of "
             "every bucket (the reduce-scatter's), the all-gather spreads the parameters, "
             "bitwise the parameters of 0; auto: 1 from 2 ranks on with --collective ring or "
             "hierarchical, else 0",
             [](const TrainConfig& c, int) {
               require(c.zero != ZeroChoice::kOn || c.collective != CollectiveKind::kMpi,
                       "--zero 1 updates the shard a reduce-scatter leaves each rank, and "
                       "MPI's allreduce runs no halves: it needs --collective ring or "
                       "hierarchical (or --zero auto, which is 0 there)");
             }),
  };
}

}  // namespace
}  // namespace ringtrain
