// Which settings define the experiment, and which may change when a run is resumed: one
// table, beside the option table (options.hpp), read by every check that compares a
// checkpoint with the launch that wants to continue it.
//
//   defines the experiment   the model as built (its canonical spec: --model, --mlp-hidden,
//                            --dropout), the data (digest), the loss, the optimizer and its
//                            hyperparameters, the schedule and its parameters, --lr-scaling,
//                            the seed, the global batch, the reduction (and under --reduction
//                            exact its --exact-micro-batch), the wire precision, the
//                            validation split (--validation-fraction), and the schedule's
//                            horizon where the schedule follows the run's length (cosine, or
//                            step without --step-size): a longer budget would change every
//                            learning rate after the checkpoint, so it is another experiment
//   may change on resume     everything else: how long the run is (--steps, --epochs) where
//                            the schedule does not follow it, how it is computed (ranks,
//                            --local-batches, threads, kernels, buckets, overlap, --zero,
//                            --collective, --sync-bn), how often it saves, evaluates and
//                            logs, where it writes. A resume applies them and records them
//                            in metrics.jsonl (allowed_changes).
//
// A checkpoint whose stored configuration (its header's JSON) differs in a setting that
// defines the experiment belongs to another experiment: a resume refuses it (exit 2), naming
// each such setting with both values, and never passes over it to an older file.
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

namespace ringtrain {

struct ExperimentKey {
  std::string_view key;   // in the checkpoint's configuration JSON
  std::string_view flag;  // what the user types to set it ("" for values derived from flags)
};

// Every setting that defines the experiment.
std::span<const ExperimentKey> experiment_keys();

// Throws UsageError unless every experiment key present in both configurations (JSON text:
// a checkpoint's stored one, this launch's) has the same value:
//   "<file>: a checkpoint of another experiment: --optimizer adamw (this launch: sgd),
//    --lr 0.1 (this launch: 0.05); resume with the settings it was written with, or start a
//    new run with another --run-dir"
// A key missing from either (a file written before it was stored) is not compared.
void check_same_experiment(const std::string& stored_config_json,
                           const std::string& run_config_json, const std::string& file);

// The settings a resume changes that may change (both configurations as JSON text, as for
// check_same_experiment): {key: [stored value, this launch's value]} for every key of this
// launch's configuration that the stored one also holds with another value, the experiment's
// keys and --resume itself left out. {} when nothing changed or a text is not a JSON object.
nlohmann::json allowed_changes(const std::string& stored_config_json,
                               const std::string& run_config_json);

}  // namespace ringtrain
