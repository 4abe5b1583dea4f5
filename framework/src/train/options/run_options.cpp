// The option table's rows for the run (outputs, evaluation, target), checkpoints, the safety
// nets and the split of the global batch; options.cpp holds the others and the table.
#include <fmt/format.h>

#include <cmath>
#include <filesystem>

#include "train/options/option_rows.hpp"

namespace ringtrain::option_rows {
namespace {

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

}  // namespace

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

}  // namespace ringtrain::option_rows
