// TrainConfig: everything `ringtrain train` was asked to do, resolved and validated.
//
// Each field is the value of one option of the table in options.hpp, which
// gives its flag name, help and check once. The CLI fills it from flags and --config;
// validate() checks every value before anything is written, so bad input costs one line and
// exit code 2 (UsageError), never a half-made run directory. to_json() is what manifest.json
// records under "config". Modes are the enums of modes.hpp.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ringtrain/framework/optim/optimizer.hpp"
#include "ringtrain/framework/optim/schedule.hpp"
#include "ringtrain/framework/size_list.hpp"
#include "ringtrain/framework/train/modes.hpp"

namespace ringtrain {

struct TrainConfig {
  // data and model
  std::string data_dir;                 // empty: the Debian package's folder
  std::uint64_t data_memory_limit = 0;  // bytes the data may hold in memory; 0: the machine's
  std::string model = "mlp";
  std::string mlp_hidden = "1024,1024";
  float dropout = 0.0f;
  Conv2d::Algorithm conv_algorithm = Conv2d::Algorithm::kAuto;  // of 5x5 stride-1 layers
  LossChoice loss = LossChoice::kAuto;  // auto: cross-entropy for class labels, mse for targets
  double validation_fraction = 0.0;     // of train held out for validation (holdout.hpp); 0: none

  // batches and length
  std::size_t global_batch = 128;
  std::string local_batches;         // "b0,b1,...": explicit per-rank split; empty: near-equal;
                                     // "auto": the split follows each rank's measured speed
  std::size_t rebalance_every = 20;  // --local-batches auto: steps per measured window
  std::size_t max_local_batch = 0;   // --local-batches auto: the most a rank gets; 0: B
  std::uint64_t steps = 0;           // 0: use epochs
  double epochs = 10;

  // optimizer and schedule
  OptimizerKind optimizer = OptimizerKind::kSgd;
  float lr = 0.05f;
  float momentum = 0.9f;
  bool nesterov = false;
  float weight_decay = 0.0f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  ScheduleKind schedule = ScheduleKind::kConstant;
  std::uint64_t warmup_steps = 0;
  std::uint64_t step_size =
      0;  // schedule=step: decay every step_size steps (0: a third of the run)
  float gamma = 0.1f;
  float min_lr = 0.0f;
  LrScaling lr_scaling = LrScaling::kNone;  // relative to batch 128
  std::uint64_t seed = 0;

  // data parallelism
  Reduction reduction = Reduction::kSumScaled;  // mean-of-means: wrong, for teaching
  std::size_t exact_micro_batch = 16;  // --reduction exact: samples per exact micro-batch (m)
  SyncBn sync_bn = SyncBn::kAuto;
  int blas_threads = 0;                 // 0: cores per node / ranks per node
  GemmChoice gemm = GemmChoice::kAuto;  // blas.hpp: Kernels
  CollectiveKind collective = CollectiveKind::kRing;
  int ranks_per_host = 0;  // hierarchical: hosts of K consecutive ranks; 0: MPI's nodes
  collectives::Wire wire = collectives::Wire::kFp32;  // bf16: gradients rounded on the wire

  // overlap of the gradient sum with backward (gradient_reducer.hpp)
  std::size_t bucket_bytes = 0;    // bucket cap; 0: the default rule from the α-β model
  Overlap overlap = Overlap::kOn;  // on: rings start during backward; off: after it; alternate:
                                   // on in even steps, off in odd ones (to measure overlap)
  PollDriver poll_driver = PollDriver::kLayers;  // --ring-driver: who polls the rings
  OnOff bucket_update = OnOff::kOn;    // on: update each bucket once summed (hidden flag)
  std::size_t segments_in_flight = 0;  // overlapping rings' window; 0: the reducer's default
  std::string cost_model;              // JSON of `ringtrain bench allreduce --json` for the default
  std::uint64_t trace_steps = 20;      // steps recorded in trace.json; 0: no trace
  // 1: ZeRO-1, optimizer state sharded over ranks (optimizer_shard.hpp); auto: 1 wherever the
  // collective has halves to update (shards_optimizer_state in run_plan.hpp)
  ZeroChoice zero = ZeroChoice::kAuto;

  // run directory, evaluation, logging
  std::string run_dir;           // empty: runs/<model>-<timestamp>
  std::uint64_t eval_every = 0;  // steps; 0: once per epoch
  double target = 0.0;  // 0: no target; reached when the metric is >= it (accuracy), <= (MSE)
  std::uint64_t log_every = 50;
  bool evaluate = true;  // --no-eval: skip evaluation (tests, speed runs)
  bool quiet = false;    // --quiet: rank 0 prints errors only
  ProgressOutput progress = ProgressOutput::kAuto;  // rank 0's bar or step lines (modes.hpp)
  // A note for rank 0 to print once at start (an old config's `progress = "thread"`), or empty.
  std::string deprecation_note;

  // checkpoints: always one at the end; --checkpoint-every adds periodic ones
  std::string checkpoint_every =
      "auto";                  // "auto" (Young/Daly), K steps, or 0: at the end only
  double mtbf_s = 0.0;         // job mean time between failures, for "auto"; 0: one day
  double node_mtbf_s = 0.0;    // one host's MTBF: the job's is this over the hosts (instead of mtbf)
  std::size_t keep = 3;        // newest checkpoints kept
  std::size_t max_failed_saves = 3;  // periodic saves that may fail in a row before the run stops
  OnOff checkpoint_async = OnOff::kOn;  // on: periodic saves are written by a writer thread
  // async saves under --zero 1: shards gathered in the snapshot or sent to the writer
  ZeroGather zero_gather = ZeroGather::kWriter;
  std::string checkpoint_key;  // MAC key file; empty: $RINGTRAIN_CHECKPOINT_KEY_FILE, else unsigned
  std::string resume;          // "auto" (newest that verifies in <run-dir>/checkpoints) or a file

  // safety nets of data-parallel training
  std::uint64_t replica_check_every =
      100;  // steps between replica hash checks (and at the end); 0: end only
  std::uint64_t max_nonfinite_steps = 5;  // consecutive skipped (non-finite) steps before giving up
  double watchdog_s = 0.0;                // stuck-in-a-phase limit; 0: automatic (floor 60 s)

  // Runs every option's check: throws UsageError naming the flag and value for anything out
  // of range. world_size is needed to check --local-batches.
  void validate(int world_size) const;
  // Keys are the flag names ("global-batch"), so the JSON in the manifest and the TOML in
  // the run directory both say exactly what to pass to reproduce the run.
  nlohmann::json to_json() const;
  std::string to_toml() const;
  // --local-batches auto (batch_split.hpp): the split is re-decided every rebalance_every steps.
  bool auto_split() const { return local_batches == "auto"; }
  // The split of the first step: --local-batches b0,b1,..., or near-equal (also under auto).
  // Throws UsageError for a list that does not fit the world or the global batch.
  std::vector<std::size_t> first_split(std::size_t world_size) const;
  // The most samples a rank may get: --max-local-batch (0: B) under auto, else the largest
  // of first_split.
  std::size_t local_batch_cap(std::size_t world_size) const;
  // --max-local-batch's check: throws UsageError for a cap without auto, above B or below
  // the near-equal split, and for auto with --reduction mean-of-means.
  void check_auto_split(int world_size) const;

  // The optimizer of --optimizer with --momentum, --nesterov, --weight-decay and the betas.
  OptimizerConfig optimizer_config() const;
  // The learning-rate schedule of a run of total_steps steps: --lr scaled by --lr-scaling
  // for the global batch (reference batch 128), warmup, and the decay of --schedule.
  ScheduleConfig schedule_config(std::uint64_t total_steps) const;
  std::string describe_schedule(std::uint64_t total_steps) const;
};

}  // namespace ringtrain
