// The training state as a checkpoint state tree, and back.
//
//   /model       parameters by name ("layers.0.linear/weight"), buffers
//   ("layers.1.batchnorm/running_mean") /optimizer   "<state>/<parameter>" per optimizer state
//   tensor ("momentum/layers.0.linear/weight"),
//                "step_count", "describe"
//   /schedule    "step" (the schedule is a pure function of config and step), "describe"
//   /data        sampler "seed", "epoch", "position"
//   /rng         "seed", "generator": all randomness is counter-based, keyed by the seed
//   /progress    step, samples seen, useful compute seconds, skip counters, best accuracy,
//                and the open metrics window (so the resumed run logs the same losses);
//                with --local-batches auto also split_plan (JSON: split and speeds)
//
// Restoring every entry makes a resumed run continue the same computation bitwise.
//
// One layout whatever --zero: with ZeRO-1 (optimizer_shard.hpp) each rank's optimizer holds
// only its shard; the checkpoint still stores the full tensors, gathered from all ranks
// (gather_optimizer_state), and on restore each rank takes its shard of them. So a file
// written with --zero 1 at N = 2 resumes with --zero 0, or at N = 3, and the other way round.
//
// --wire bf16 adds /optimizer/wire_residual, (N, M): row r is rank r's rounding residual
// (collectives/error_feedback.hpp), gathered to rank 0 for the save; on resume each rank
// takes its row. It differs by rank, so such a file resumes at the same N only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ringtrain/checkpoint/state_tree.hpp"
#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/collectives/error_feedback.hpp"
#include "ringtrain/framework/data/sampler.hpp"
#include "ringtrain/framework/optim/optimizer.hpp"
#include "ringtrain/framework/sequential.hpp"
#include "ringtrain/framework/train/optimizer_shard.hpp"

namespace ringtrain {

// Counters of the training loop that a checkpoint must carry.
struct TrainingCounters {
  std::uint64_t step = 0;  // optimizer steps completed (skipped ones included)
  std::uint64_t samples_seen = 0;
  double useful_compute_s = 0.0;  // time spent in steps that this state contains
  std::uint64_t skipped_steps = 0;
  std::uint64_t nonfinite_in_a_row = 0;
  // The run's metric (evaluation.hpp: Metric): accuracy, or MSE on regression data (whose
  // best starts at +inf), on the split that selects the best step (validation under
  // --validation-fraction, else test). Stored under the keys best_test_accuracy and
  // final_test_accuracy, the names files had before validation and regression, so those
  // files still load.
  double best_selection_metric = 0.0;
  double final_selection_metric = 0.0;
  // The metrics window open at the save: losses of steps since the last metrics line.
  double window_loss = 0.0;
  double window_samples = 0.0;
  std::uint64_t window_steps = 0;
};

// Borrowed views of everything that makes up a training state.
struct TrainingState {
  Sequential& model;
  Optimizer& optimizer;
  data::GlobalSampler& sampler;
  TrainingCounters& counters;
  std::uint64_t seed;
  // Which elements the optimizer's state covers; null: all of them (no sharding).
  const OptimizerShard* shard = nullptr;
  // This rank's bf16 wire residual; null or empty: an fp32 wire, nothing to save.
  collectives::ErrorFeedback* feedback = nullptr;
  // --local-batches auto: the split plan as JSON text (the split in force and the smoothed
  // speeds, split_planner.hpp), stored as /progress/split_plan; null: the run has none. A
  // file without it restores an empty text (the plan then restarts near-equal).
  std::string* split_plan = nullptr;
};

// The schema of `expected` with /progress/split_plan toggled: a run with a split plan also
// reads files written without one, and the other way round (Checkpointer::resume tries both).
checkpoint::Expected toggle_split_plan(const checkpoint::Expected& expected);

bool sharded(const TrainingState& state);

// One optimizer state tensor over the whole flat buffer.
struct FullOptimizerState {
  std::string name;
  std::vector<float> values;  // (total parameters)
};
// Every optimizer state tensor of a sharded state, in full on every rank. Collective.
std::vector<FullOptimizerState> gather_optimizer_state(const collectives::Communicator& comm,
                                                       const TrainingState& state);
// The same on rank 0 only: the other ranks get an empty list and never hold the full
// state (what a save needs: only rank 0 writes). Collective.
std::vector<FullOptimizerState> gather_optimizer_state_to_root(
    const collectives::Communicator& comm, const TrainingState& state);

// Every rank's wire residual, rank after rank (N x M), on rank 0 only; empty on the other
// ranks and without a residual. Collective.
std::vector<float> gather_residuals_to_root(const collectives::Communicator& comm,
                                            const TrainingState& state);

// A sharded state needs its optimizer tensors gathered first (`gathered`, in the order of
// optimizer.state()); throws Error otherwise. Unsharded, `gathered` is ignored. `recycle`:
// an earlier capture whose array storage the new tree reuses (it is left empty). A state with
// a wire residual needs all ranks' residuals (`residuals`, N x M, gather_residuals_to_root);
// throws Error otherwise.
checkpoint::StateTree capture(const TrainingState& state,
                              std::span<const FullOptimizerState> gathered = {},
                              checkpoint::StateTree* recycle = nullptr,
                              std::span<const float> residuals = {});

// What capture_deferred leaves out of the tree, to be added by put_deferred once gathered
// (on any thread: it holds copies, no view of the live state).
struct DeferredState {
  std::vector<std::string> state_names;  // sharded optimizer tensors, optimizer.state() order
  std::vector<ParameterEntry> entries;   // the flat parameter buffer's entries (if sharded)
  std::size_t residual_elements = 0;     // M per rank; 0: no wire residual
};
// capture() without what must be gathered from the other ranks first: a sharded optimizer's
// state tensors and the wire residuals. `later` receives what put_deferred needs. Local.
checkpoint::StateTree capture_deferred(const TrainingState& state,
                                       checkpoint::StateTree* recycle, DeferredState& later);
// Completes a capture_deferred tree: the gathered tensors (as gather_optimizer_state_to_root
// makes them, in later.state_names' order) and the residuals (N x M). The tree then holds
// what capture() would have put. Touches no live state. Throws Error on a size mismatch.
void put_deferred(checkpoint::StateTree& tree, const DeferredState& later,
                  std::span<const FullOptimizerState> gathered, std::span<const float> residuals);

// Throws UsageError unless the tree was written by a run with the same data order: the same
// seed (/data/seed, /rng/seed), training set size and global batch as `state`. The file's
// layout (model, optimizer) is checked by reading it against Expected::of(capture(state));
// this checks the values a layout cannot show. Call it before restore.
void check_compatible(const checkpoint::StateTree& tree, const TrainingState& state);

// The /model entries of `model` (parameters and buffers, each with its shape) added to
// `expected`: what a checkpoint of this model must hold in /model.
void expect_model(checkpoint::Expected& expected, const Sequential& model);
// Overwrites the model's parameters and buffers (BatchNorm statistics) from a tree read
// against a schema that holds expect_model's entries.
void restore_model(const checkpoint::StateTree& tree, Sequential& model);

// Throws UsageError unless the run that wrote a checkpoint trained on the same data: the
// "data_digest" of its configuration (`stored_config_json`, the file's header) equals this
// run's (`run_config_json`). Either without a digest (a file written before digests were
// stored): no check. The message names both digests and paths.
void check_same_data(const std::string& stored_config_json, const std::string& run_config_json);

// Overwrites the state from a tree that was read against the schema of capture(state)
// (checkpoint::Expected::of), so every entry exists with the right shape. A sharded optimizer
// takes its shard of each full tensor.
void restore(const checkpoint::StateTree& tree, const TrainingState& state);
// Rank `rank`'s row of the wire residual (read against the schema of a capture with
// `world_size` rows); nothing without a residual.
void restore_residual(const checkpoint::StateTree& tree, const TrainingState& state, int rank,
                      int world_size);

}  // namespace ringtrain
