// `ringtrain train`: flags (and --config TOML with the same keys) into a TrainConfig, then
// the Trainer. Flags override the file; an unknown key is an error (exit 2).
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "commands.hpp"
#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/train/trainer.hpp"
#include "ringtrain/models/registry.hpp"

namespace ringtrain::cli {

void add_train(CLI::App& app, Runner& run) {
  auto config = std::make_shared<TrainConfig>();
  TrainConfig& c = *config;
  CLI::App* train = app.add_subcommand("train", "train a model on Fashion-MNIST");
  // Read by config_file.cpp before parsing; declared here for --help.
  train->add_option("--config", "TOML file whose keys are these flags' names (flags win)");
  // The last value of an option wins, so command-line flags override the --config file's.
  train->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);

  train->add_option("--data", c.data_dir,
                    "folder of the IDX files (default: the Debian package dataset-fashion-mnist)");
  train->add_option("--model", c.model, "mlp | cnn | cnn-bn")->capture_default_str();
  train->add_option("--mlp-hidden", c.mlp_hidden, "hidden widths of mlp")->capture_default_str();
  train->add_option("--dropout", c.dropout, "dropout probability after hidden layers")
      ->capture_default_str();
  train
      ->add_option("--conv-algorithm", c.conv_algorithm,
                   "auto | im2col | winograd: how 5x5 stride-1 convolutions run (auto: "
                   "Winograd F(4x4, 5x5) from 8 channels)")
      ->capture_default_str();
  train->add_option("--global-batch", c.global_batch, "samples per step over all ranks")
      ->capture_default_str();
  train->add_option("--local-batches", c.local_batches,
                    "explicit per-rank split b0,b1,... summing to the global batch");
  auto* steps = train->add_option("--steps", c.steps, "number of steps (overrides --epochs)");
  train->add_option("--epochs", c.epochs, "epochs over the training set")
      ->capture_default_str()
      ->excludes(steps);
  train->add_option("--optimizer", c.optimizer, "sgd | adamw")->capture_default_str();
  train->add_option("--lr", c.lr, "learning rate for global batch 128 (see --lr-scaling)")
      ->capture_default_str();
  train->add_option("--momentum", c.momentum, "SGD momentum")->capture_default_str();
  train->add_flag("--nesterov", c.nesterov, "Nesterov momentum");
  train
      ->add_option("--weight-decay", c.weight_decay,
                   "weight decay (SGD: coupled, AdamW: decoupled)")
      ->capture_default_str();
  train->add_option("--beta1", c.beta1, "AdamW beta1")->capture_default_str();
  train->add_option("--beta2", c.beta2, "AdamW beta2")->capture_default_str();
  train->add_option("--eps", c.eps, "AdamW epsilon")->capture_default_str();
  train->add_option("--schedule", c.schedule, "constant | step | cosine")->capture_default_str();
  train->add_option("--warmup-steps", c.warmup_steps, "linear warmup steps")->capture_default_str();
  train->add_option("--step-size", c.step_size,
                    "schedule=step: steps between decays (0: a third of the run)");
  train->add_option("--gamma", c.gamma, "schedule=step: decay factor")->capture_default_str();
  train->add_option("--min-lr", c.min_lr, "schedule=cosine: final learning rate")
      ->capture_default_str();
  train
      ->add_option("--lr-scaling", c.lr_scaling,
                   "none | linear | sqrt: scale --lr with the global batch")
      ->capture_default_str();
  train->add_option("--seed", c.seed, "seed of initialisation, data order and dropout")
      ->capture_default_str();
  train
      ->add_option("--reduction", c.reduction,
                   "sum-scaled | mean-of-means (wrong on purpose, for teaching)")
      ->capture_default_str();
  train->add_option("--sync-bn", c.sync_bn, "auto | on | off: BatchNorm statistics over all ranks")
      ->capture_default_str();
  train
      ->add_option("--blas-threads", c.blas_threads,
                   "OpenBLAS threads per rank (0: cores per node / ranks per node)")
      ->capture_default_str();
  train
      ->add_option("--gemm", c.gemm,
                   "auto | openblas | own: who runs the Linear layers' products (own: "
                   "ringtrain's AVX-512 kernels; auto: own on Intel AVX-512 and AMD Zen 5)")
      ->capture_default_str();
  train->add_option("--collective", c.collective, "ring | mpi: our ring or MPI_Allreduce")
      ->capture_default_str();
  train
      ->add_option("--bucket-bytes", c.bucket_bytes,
                   "gradient bucket cap in bytes (0: the default rule from the ring's alpha-B "
                   "model, printed at start)")
      ->capture_default_str();
  train
      ->add_option("--overlap", c.overlap,
                   "on | off | alternate: start a bucket's ring during backward as soon as its "
                   "gradients are written, or reduce after backward; alternate: on in even "
                   "steps, off in odd ones, to measure what overlap buys step by step (the "
                   "update is bitwise the same)")
      ->capture_default_str();
  train
      ->add_option("--progress", c.progress,
                   "layers | thread: rings advance between layers on the main thread, or on a "
                   "polling thread")
      ->capture_default_str();
  train->add_option(
      "--cost-model", c.cost_model,
      "JSON of `ringtrain bench allreduce --json` whose alpha-B fit sets the default bucket cap");
  train->add_option("--trace-steps", c.trace_steps, "steps recorded in trace.json (0: no trace)")
      ->capture_default_str();
  train->add_option("--bucket-update", c.bucket_update)->group("");
  train
      ->add_option("--segments-in-flight", c.segments_in_flight,
                   "ring messages posted ahead per ring step while overlapping (0: the measured "
                   "default, 2, as blocking rings post)")
      ->capture_default_str();
  train
      ->add_option("--zero", c.zero,
                   "0 | 1: 1 shards the optimizer state over ranks (ZeRO-1): each rank updates "
                   "its chunk of every bucket, the ring all-gathers the parameters")
      ->capture_default_str();
  train->add_option("--run-dir", c.run_dir,
                    "where manifest.json and metrics.jsonl go (default runs/<model>-<time>)");
  train->add_option("--eval-every", c.eval_every, "evaluate every K steps (0: every epoch)")
      ->capture_default_str();
  train
      ->add_option("--target-accuracy", c.target_accuracy,
                   "stop when test accuracy >= A (0: no target)")
      ->capture_default_str();
  train->add_option("--log-every", c.log_every, "steps between metrics lines")
      ->capture_default_str();
  train->add_flag("!--no-eval", c.evaluate, "do not evaluate on the test set");
  train->add_flag("--quiet", c.quiet, "print errors only");
  train
      ->add_option("--checkpoint-every", c.checkpoint_every,
                   "save every K steps, or auto (Young/Daly interval from the measured save cost "
                   "and --mtbf); 0: only at the end")
      ->capture_default_str();
  train->add_option("--mtbf", c.mtbf_s,
                    "the job's mean time between failures in seconds, for --checkpoint-every auto");
  train->add_option("--keep", c.keep, "newest checkpoints kept")->capture_default_str();
  train->add_option("--resume", c.resume,
                    "auto (newest checkpoint of --run-dir that verifies) or a checkpoint file");
  train
      ->add_option("--replica-check-every", c.replica_check_every,
                   "steps between checks that all replicas are bitwise equal (0: at the end only)")
      ->capture_default_str();
  train
      ->add_option(
          "--max-nonfinite-steps", c.max_nonfinite_steps,
          "consecutive steps with a non-finite gradient that are skipped before the run stops")
      ->capture_default_str();
  train
      ->add_option("--watchdog-s", c.watchdog_s,
                   "end the job if a rank is stuck this long in one phase (0: automatic, 100 x "
                   "step time, at least 60 s)")
      ->capture_default_str();
  // Fault injection for the test suite: hidden from --help (empty group), and kept out of
  // the TrainConfig, so no run directory records it as the user's configuration.
  auto faults = std::make_shared<FaultPlan>();
  FaultPlan& f = *faults;
  train->add_option("--test-nan-rank", f.nan_rank)->group("");
  train->add_option("--test-nan-step", f.nan_step)->group("");
  train->add_option("--test-perturb-rank", f.perturb_rank)->group("");
  train->add_option("--test-perturb-step", f.perturb_step)->group("");
  train->add_option("--test-hang-rank", f.hang_rank)->group("");
  train->add_option("--test-hang-step", f.hang_step)->group("");
  train->add_option("--test-hang-s", f.hang_s)->group("");
  train->add_option("--test-kill-rank", f.kill_rank)->group("");
  train->add_option("--test-kill-step", f.kill_step)->group("");
  train->add_option("--test-crash-phase", f.crash_phase)->group("");
  train->add_option("--test-crash-step", f.crash_step)->group("");
  train->add_option("--test-save-cost-s", f.save_cost_s)->delimiter(',')->group("");
  train->add_option("--test-step-s", f.step_s)->group("");

  train->callback([&run, config, faults] {
    run = [config, faults]() -> int {
      collectives::Communicator comm;
      Trainer trainer(*config, models::make_model(*config), models::input_shape(), comm);
      // A stuck rank ends the whole job (MPI_Abort), not just itself.
      trainer.set_watchdog_action([](const std::string& message) {
        const std::string line = message + "\n";  // one write: lines of ranks never interleave
        [[maybe_unused]] auto written = ::write(2, line.data(), line.size());
        MPI_Abort(MPI_COMM_WORLD, 3);
      });
      trainer.set_fault_injector(make_scripted_faults(*faults));
      trainer.run();
      return 0;
    };
  });
}

}  // namespace ringtrain::cli
