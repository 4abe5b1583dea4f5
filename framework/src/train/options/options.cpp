// The table of `ringtrain train`'s options (see options.hpp); config_toml.cpp reads --config.
//
// option(name, &TrainConfig::field, help, check) makes one row; the field's type decides how
// its text is parsed and how the manifest shows it (strings as they are, integers strictly,
// floats by their shortest decimal form, enums by their word from modes.hpp).
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
#include "train/sum/exact_step.hpp"

namespace ringtrain {
namespace {

using Check = std::function<void(const TrainConfig&, int world_size)>;

void require(bool ok, const std::string& message) {
  if (!ok) throw UsageError(message);
}

// A float as the double with the same shortest decimal form: 0.9f -> 0.9, not 0.8999999761.
double shortest(float value) {
  return std::stod(fmt::format("{}", value));
}

// The whole text as a number of type T: "12" yes, "12x", "", "many" and "-1" (unsigned) no.
template <typename T>
T parse_number(std::string_view text, const std::string& flag) {
  T value{};
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || stop != end) {
    const char* what = std::is_integral_v<T> ? (std::is_signed_v<T> ? "not a whole number"
                                                                    : "not a whole number >= 0")
                                             : "not a number";
    throw UsageError(fmt::format("{} {}: {}", flag, files::escaped(text), what));
  }
  return value;
}

bool parse_switch(std::string_view text, const std::string& flag) {
  if (text == "true") return true;
  if (text == "false") return false;
  throw UsageError(fmt::format("{} {}: a switch is true or false", flag, files::escaped(text)));
}

// One row: the field's type picks the kind, the parser and the manifest's form.
template <typename T>
TrainOption option(std::string name, T TrainConfig::*field, std::string help, Check check = {}) {
  TrainOption o;
  o.name = std::move(name);
  o.help = std::move(help);
  o.check = std::move(check);
  const std::string flag = "--" + o.name;
  if constexpr (std::is_same_v<T, std::string>) {
    o.kind = ValueKind::kText;
    o.set = [field](TrainConfig& c, std::string_view text) { c.*field = std::string(text); };
    o.get = [field](const TrainConfig& c) { return nlohmann::json(c.*field); };
  } else if constexpr (std::is_same_v<T, bool>) {
    o.kind = ValueKind::kSwitch;
    o.set = [field, flag](TrainConfig& c, std::string_view text) {
      c.*field = parse_switch(text, flag);
    };
    o.get = [field](const TrainConfig& c) { return nlohmann::json(c.*field); };
  } else if constexpr (std::is_enum_v<T>) {
    o.kind = ValueKind::kChoice;
    for (const Choice<T>& choice : choices<T>()) o.choices.emplace_back(choice.name);
    o.help = choice_list<T>() + (o.help.empty() ? "" : ": " + o.help);
    o.set = [field, flag](TrainConfig& c, std::string_view text) {
      c.*field = parse_choice<T>(text, flag);
    };
    o.get = [field](const TrainConfig& c) { return nlohmann::json(name_of(c.*field)); };
  } else {
    static_assert(std::is_arithmetic_v<T>, "an option's field is a string, bool, enum or number");
    o.kind = std::is_integral_v<T> ? ValueKind::kWhole : ValueKind::kReal;
    o.set = [field, flag](TrainConfig& c, std::string_view text) {
      c.*field = parse_number<T>(text, flag);
    };
    o.get = [field](const TrainConfig& c) {
      if constexpr (std::is_same_v<T, float>) return nlohmann::json(shortest(c.*field));
      return nlohmann::json(c.*field);
    };
  }
  return o;
}

// A switch that clears `field` when given: --no-eval sets evaluate = false.
TrainOption negated_switch(std::string name, bool TrainConfig::*field, std::string help) {
  TrainOption o = option(std::move(name), field, std::move(help));
  const std::string flag = o.flag();
  o.set = [field, flag](TrainConfig& c, std::string_view text) {
    c.*field = !parse_switch(text, flag);
  };
  o.get = [field](const TrainConfig& c) { return nlohmann::json(!(c.*field)); };
  return o;
}

// An option whose values name files (PathRule).
TrainOption path(TrainOption o, PathRule rule = PathRule::kPath) {
  o.path = rule;
  return o;
}

// An option that takes a comma list of whole numbers.
TrainOption list(TrainOption o) {
  o.list = true;
  return o;
}

TrainOption not_in_config_toml(TrainOption o) {
  o.in_config_toml = false;
  return o;
}

// Another name of an option that config.toml writes under its own name (the manifest's
// config shows both, with the same value, for scripts that read the old name).
TrainOption alias(TrainOption o) {
  return not_in_config_toml(std::move(o));
}

std::vector<TrainOption> data_and_model_options();
std::vector<TrainOption> optimizer_options();
std::vector<TrainOption> parallel_options();
std::vector<TrainOption> bucket_options();
std::vector<TrainOption> run_options();
std::vector<TrainOption> checkpoint_options();
std::vector<TrainOption> safety_options();
std::vector<TrainOption> split_options();

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

// --resume: "never" is an explicit fresh start (the field stays empty).
TrainOption resume_option() {
  TrainOption o = option(
      "resume", &TrainConfig::resume,
      "auto: the newest checkpoint of --run-dir that verifies (if the folder holds checkpoints "
      "and this launch accepts none, nothing is changed and each file's reason is listed); a "
      "checkpoint file; or never: start at step 0 (a --run-dir that holds a run is refused)",
      [](const TrainConfig& c, int) {
        require(c.resume.empty() || !c.run_dir.empty(),
                "--resume " + c.resume +
                    " needs --run-dir DIR (the run to continue; its checkpoints/ folder)");
      });
  o.set = [](TrainConfig& c, std::string_view text) {
    c.resume = text == "never" ? std::string() : std::string(text);
  };
  return o;
}

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
      ranged(
          option(
              "zero", &TrainConfig::zero,
              "0 | 1: 1 shards the optimizer state over ranks (ZeRO-1): each rank updates its "
              "shard of every bucket (the reduce-scatter's), the all-gather spreads the parameters",
              [](const TrainConfig& c, int) {
                require(c.zero == 0 || c.zero == 1,
                        fmt::format("--zero {}: choose 0 (every rank keeps all optimizer state) "
                                    "or 1 (ZeRO-1: each rank its shard)",
                                    c.zero));
                require(c.zero == 0 || c.collective != CollectiveKind::kMpi,
                        "--zero 1 updates the shard a reduce-scatter leaves each rank, and "
                        "MPI's allreduce runs no halves: it needs --collective ring or "
                        "hierarchical");
              }),
          0, 1),
  };
}

// --progress: the bar or the step lines. The ring driver's words (layers, thread), which this
// flag named before --ring-driver, still set the driver, with a note saying what to write.
TrainOption progress_option() {
  TrainOption o = option("progress", &TrainConfig::progress,
                         "auto: a bar on a terminal (also under mpiexec), lines into a file or "
                         "pipe; off: no per-step output (evaluations, saves and the summary "
                         "still print; --quiet prints errors only)");
  o.set = [](TrainConfig& c, std::string_view text) {
    if (text != "layers" && text != "thread") {
      c.progress = parse_choice<ProgressOutput>(text, "--progress");
      return;
    }
    c.poll_driver = parse_choice<PollDriver>(text, "--ring-driver");
    c.deprecation_note = fmt::format(
        "ringtrain: note: progress {0} names the ring driver, now --ring-driver {0} (in a "
        "config file: ring-driver = \"{0}\"); --progress chooses the output: {1}",
        text, choice_list<ProgressOutput>());
  };
  return o;
}

std::vector<TrainOption> run_options() {
  return {
      not_in_config_toml(
          option("run-dir", &TrainConfig::run_dir,
                 "where manifest.json and metrics.jsonl go (default runs/<model>-<time>)")),
      ranged(
          option("eval-every", &TrainConfig::eval_every, "evaluate every K steps (0: every epoch)"),
          0, 0x1p40),
      ranged(
          option(
              "target", &TrainConfig::target,
              "stop when the test metric reaches VALUE: accuracy >= VALUE (class labels), MSE <= "
              "VALUE (regression targets); 0: no target",
              [](const TrainConfig& c, int) {
                require(std::isfinite(c.target) && c.target >= 0.0,
                        fmt::format("--target {} must be >= 0 (0: no target)", c.target));
                require(c.target <= 1.0 || c.loss != LossChoice::kCrossEntropy,
                        fmt::format("--target {}: a test accuracy target is in [0, 1]", c.target));
                require(c.target == 0.0 || c.evaluate,
                        fmt::format("--target {} with --no-eval: the run could never see the "
                                    "target; drop --no-eval (--eval-every K sets how often it is "
                                    "checked)",
                                    c.target));
              }),
          0, 1e30),
      alias(
          ranged(option("target-accuracy", &TrainConfig::target, "the same as --target"), 0, 1e30)),
      ranged(option("log-every", &TrainConfig::log_every, "steps between metrics lines",
                    [](const TrainConfig& c, int) {
                      require(c.log_every > 0, "--log-every 0: must be >= 1");
                    }),
             0, 0x1p40),
      negated_switch("no-eval", &TrainConfig::evaluate, "do not evaluate on the test set"),
      option("quiet", &TrainConfig::quiet, "print errors only"),
      progress_option(),
  };
}

// Checkpoints: how often, how many, how, signed, resumed.
std::vector<TrainOption> checkpoint_options() {
  return {
      option("checkpoint-every", &TrainConfig::checkpoint_every,
             "auto: every tau = sqrt(2 C mu) (Young/Daly), C the save cost measured by the first "
             "save after --log-every steps, mu the MTBF; K: every K steps; 0: only at the end",
             [](const TrainConfig& c, int) {
               if (c.checkpoint_every != "auto")
                 parse_size_list(c.checkpoint_every, "--checkpoint-every");
             }),
      ranged(option("mtbf", &TrainConfig::mtbf_s,
                    "the job's mean time between failures in seconds, for --checkpoint-every auto "
                    "(0: one day, the default for one machine)"),
             0, 1e12),
      ranged(option("node-mtbf", &TrainConfig::node_mtbf_s,
                    "one host's mean time between failures in seconds: the job's MTBF is this over "
                    "the number of hosts (instead of --mtbf)",
                    [](const TrainConfig& c, int) {
                      require(c.node_mtbf_s >= 0, "--node-mtbf: must be >= 0 seconds");
                      require(c.mtbf_s <= 0 || c.node_mtbf_s <= 0,
                              "--mtbf and --node-mtbf: give one (the job's MTBF, or one host's)");
                    }),
             0, 1e12),
      ranged(option("keep", &TrainConfig::keep, "newest checkpoints kept",
                    [](const TrainConfig& c, int) {
                      require(c.keep >= 1, "--keep 0: keep at least the newest checkpoint");
                    }),
             0, 1e6),
      ranged(
          option("max-failed-saves", &TrainConfig::max_failed_saves,
                 "periodic checkpoint saves that may fail in a row (disk full, I/O error) before "
                 "the run stops; training goes on from the previous durable checkpoint meanwhile",
                 [](const TrainConfig& c, int) {
                   require(c.max_failed_saves >= 1,
                           "--max-failed-saves 0: must be >= 1 (1 stops at the first failure)");
                 }),
          0, 1e6),
      option("checkpoint-async", &TrainConfig::checkpoint_async,
             "periodic saves block training for a snapshot of the state only; rank 0 writes "
             "the file on a writer thread while training goes on (saves at the end and at a "
             "stop signal stay synchronous)"),
      option("zero-gather", &TrainConfig::zero_gather,
             "asynchronous saves with --zero 1 (or a bf16 wire): the other ranks' shards reach "
             "rank 0 inside the snapshot (snapshot: collective gather, training waits) or on "
             "the way to the writer thread (writer: each rank copies its shard and sends it "
             "without waiting; rank 0's writer assembles the full state)"),
      path(option("checkpoint-key", &TrainConfig::checkpoint_key,
                  "MAC key file (32 bytes, readable by its owner only): sign every checkpoint "
                  "and refuse unsigned ones on resume (default: $RINGTRAIN_CHECKPOINT_KEY_FILE, "
                  "else none)")),
      not_in_config_toml(resume_option()),
  };
}

// The safety nets of data-parallel training.
std::vector<TrainOption> safety_options() {
  return {
      ranged(
          option("replica-check-every", &TrainConfig::replica_check_every,
                 "steps between checks that all replicas are bitwise equal (0: at the end only)"),
          0, 0x1p40),
      ranged(
          option(
              "max-nonfinite-steps", &TrainConfig::max_nonfinite_steps,
              "consecutive steps with a non-finite gradient that are skipped before the run stops"),
          0, 0x1p40),
      ranged(
          option("watchdog-s", &TrainConfig::watchdog_s,
                 "end the job if a rank is stuck this long in one phase (0: automatic, 100 x step "
                 "time, at least 60 s)",
                 [](const TrainConfig& c, int) {
                   require(
                       c.watchdog_s >= 0,
                       fmt::format("--watchdog-s {} must be >= 0 (0: automatic)", c.watchdog_s));
                 }),
          0, 1e9),
  };
}

std::vector<TrainOption> split_options() {
  return {
      ranged(option("rebalance-every", &TrainConfig::rebalance_every,
                    "--local-batches auto: steps per window; after each the ranks agree on a new "
                    "split of the global batch in proportion to their measured compute speeds",
                    [](const TrainConfig& c, int) {
                      require(c.rebalance_every >= 1,
                              "--rebalance-every 0: a window holds at least one step");
                    }),
             0, 0x1p40),
      ranged(option("max-local-batch", &TrainConfig::max_local_batch,
                    "--local-batches auto: the most samples a rank may get (its buffers are "
                    "planned for it; 0: the global batch)",
                    [](const TrainConfig& c, int world_size) { c.check_auto_split(world_size); }),
             0, 0x1p24),
  };
}

}  // namespace
}  // namespace ringtrain
