// Collective save and resume (see checkpointer.hpp for the protocol).
#include "ringtrain/framework/train/checkpointer.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <stdexcept>

#include "ringtrain/checkpoint/commit.hpp"
#include "ringtrain/checkpoint/contained.hpp"
#include "ringtrain/checkpoint/error.hpp"
#include "ringtrain/collectives/small.hpp"
#include "ringtrain/framework/agreed.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/train/experiment.hpp"
#include "ringtrain/framework/train/state_values.hpp"
#include "train/now.hpp"
#include "train/persistence/shard_transfer.hpp"

namespace ringtrain {
Checkpointer::Checkpointer(const collectives::Communicator& comm, std::filesystem::path dir,
                           std::size_t keep, std::string config_json,
                           const std::filesystem::path& key_file, ZeroGather gather)
    : comm_(comm),
      dir_(std::move(dir)),
      keep_(keep),
      config_json_(std::move(config_json)),
      gather_(gather),
      transfer_(std::make_unique<ShardTransfer>()) {
  std::string error;
  try {
    key_ = checkpoint::MacKey::from_flag_or_environment(key_file);
  } catch (const checkpoint::CheckpointError& e) {
    error = e.what();
  }
  fail_together<AgreedError>(comm_, error.empty() ? "" : "cannot use the checkpoint key: " + error);
}

const checkpoint::MacKey* Checkpointer::key() const {
  return key_ ? &*key_ : nullptr;
}

Checkpointer::~Checkpointer() {
  // An exception left a save in flight: let it finish, so its files end consistent (without
  // its shards, if their messages fail, it writes nothing).
  try {
    transfer_->wait();
    shards_arrived();
  } catch (const std::exception&) {
    shards_arrived(/*abandoned=*/true);
  }
  if (writer_.joinable()) writer_.join();
}

Checkpointer::Snapshot Checkpointer::snapshot(const TrainingState& state, std::uint64_t epoch,
                                              bool deferred) {
  Snapshot snap;
  snap.start_s = now_s();
  snap.header.step = state.counters.step;
  snap.header.epoch = epoch;
  snap.header.world_size = comm_.size();
  if (deferred) {
    // Rank 0's tree lacks the shards and residuals until the writer puts them in.
    transfer_->start(comm_, state);
    if (comm_.rank() == 0) {
      snap.header.config_json = config_json_;
      snap.tree = capture_deferred(state, &spare_tree_, deferred_);
    }
    return snap;
  }
  // ZeRO-1: the file holds the full optimizer state, as with --zero 0 (training_state.hpp);
  // only rank 0, which writes it, gathers it.
  const std::vector<FullOptimizerState> gathered = gather_optimizer_state_to_root(comm_, state);
  const std::vector<float> residuals = gather_residuals_to_root(comm_, state);
  if (comm_.rank() == 0) {
    snap.header.config_json = config_json_;
    snap.tree = capture(state, gathered, &spare_tree_, residuals);
  }
  return snap;
}

std::string Checkpointer::persist(const Snapshot& snap) const {
  std::string error;
  try {
    // Made at the first save, so a run refused at start leaves no folder behind.
    std::filesystem::create_directories(dir_);
    const std::filesystem::path partial =
        checkpoint::write_partial(dir_, snap.header.step, snap.header, snap.tree, key());
    const std::filesystem::path final_path = checkpoint::commit(dir_, partial);
    checkpoint::update_latest(dir_, final_path.filename());
    prune();
    return error;
  } catch (const std::exception& e) {
    error = e.what();
  }
  try {
    checkpoint::remove_partial(dir_, snap.header.step);
  } catch (const std::exception& e) {
    error += std::string("; ") + e.what();
  }
  return error;
}

void Checkpointer::prune() const {
  std::vector<std::string> unverified;
  checkpoint::prune(dir_, keep_, &unverified, key());
  // Files named like checkpoints that do not verify are someone's garbage: said once each,
  // never counted against --keep, never removed.
  const std::lock_guard lock(garbage_mutex_);
  for (const std::string& text : unverified)
    if (garbage_reported_.insert(text).second)
      std::fprintf(stderr,
                   "ringtrain: notice: %s/%s; it is not counted for --keep and is left in place\n",
                   dir_.string().c_str(), text.c_str());
}

SaveOutcome Checkpointer::agree(std::uint64_t step, const std::string& error,
                                double persist_s) const {
  // One allreduce: did rank 0 fail, and its persist time (the others contribute 0).
  double facts[2] = {error.empty() ? 0.0 : 1.0, persist_s};
  collectives::allreduce_max(comm_, std::span<double>(facts));
  SaveOutcome outcome;
  outcome.step = step;
  outcome.durable = facts[0] == 0.0;
  outcome.persist_s = facts[1];
  if (!outcome.durable)
    outcome.failure = comm_.rank() == 0 ? error : "it failed on rank 0 (see its message)";
  return outcome;
}

SaveOutcome Checkpointer::save(const TrainingState& state, std::uint64_t epoch) {
  Snapshot snap = snapshot(state, epoch);
  const std::string error = comm_.rank() == 0 ? persist(snap) : std::string();
  spare_tree_ = std::move(snap.tree);
  // The other ranks wait here for the commit, rather than in the next step's collective: the
  // save then costs every rank the same time, and every rank knows whether it is durable.
  SaveOutcome outcome = agree(snap.header.step, error, now_s() - snap.start_s);
  outcome.blocked_s = now_s() - snap.start_s;
  return outcome;
}

double Checkpointer::start_save(const TrainingState& state, std::uint64_t epoch) {
  if (in_flight_) throw std::logic_error("Checkpointer::start_save with a save in flight");
  const bool deferred = gather_ == ZeroGather::kWriter && ShardTransfer::needed(state);
  {
    std::lock_guard lock(arrival_mutex_);
    arrived_ = abandoned_ = false;
  }
  in_flight_snapshot_ = snapshot(state, epoch, deferred);
  in_flight_ = true;
  if (!transfer_->pending()) shards_arrived();  // one rank, or nothing deferred
  const double blocked_s = now_s() - in_flight_snapshot_.start_s;
  if (comm_.rank() == 0) {
    writer_error_.clear();
    writer_ = std::thread([this, deferred] { write_in_background(deferred); });
  }
  return blocked_s;
}

void Checkpointer::write_in_background(bool deferred) {
  if (deferred) {
    if (!await_shards()) {
      writer_error_ = "the save was abandoned before the other ranks' shards arrived";
      writer_persist_s_ = now_s() - in_flight_snapshot_.start_s;
      return;
    }
    try {
      put_deferred(in_flight_snapshot_.tree, deferred_, transfer_->assemble(),
                   transfer_->residuals());
    } catch (const std::exception& e) {
      writer_error_ = e.what();
      writer_persist_s_ = now_s() - in_flight_snapshot_.start_s;
      return;
    }
  }
  writer_error_ = persist(in_flight_snapshot_);
  writer_persist_s_ = now_s() - in_flight_snapshot_.start_s;
}

bool Checkpointer::await_shards() {
  std::unique_lock lock(arrival_mutex_);
  arrival_.wait(lock, [this] { return arrived_ || abandoned_; });
  return !abandoned_;
}

void Checkpointer::shards_arrived(bool abandoned) {
  {
    std::lock_guard lock(arrival_mutex_);
    (abandoned ? abandoned_ : arrived_) = true;
  }
  arrival_.notify_all();
}

void Checkpointer::poll() {
  if (in_flight_ && transfer_->pending() && transfer_->test()) shards_arrived();
}

SaveOutcome Checkpointer::finish_save() {
  if (!in_flight_) throw std::logic_error("Checkpointer::finish_save without a save in flight");
  const double start = now_s();
  // Every rank's messages complete here at the latest (a failed save's too).
  transfer_->wait();
  shards_arrived();
  if (writer_.joinable()) writer_.join();
  in_flight_ = false;
  spare_tree_ = std::move(in_flight_snapshot_.tree);
  const bool writer = comm_.rank() == 0;
  SaveOutcome outcome =
      agree(in_flight_snapshot_.header.step, writer ? writer_error_ : std::string(),
            writer ? writer_persist_s_ : 0.0);
  outcome.blocked_s = now_s() - start;
  return outcome;
}

// The newer of the newest file valid under `expected` and under `other`; `rejected` gets the
// reasons of the pass whose file is taken (of `expected`'s pass when neither finds one).
std::optional<checkpoint::Loaded> Checkpointer::load_newest_of_both(
    const checkpoint::Expected& expected, const checkpoint::Expected& other,
    std::vector<std::string>& rejected, const checkpoint::CandidateChecks& checks) const {
  std::vector<std::string> rejected_other;
  std::optional<checkpoint::Loaded> loaded =
      checkpoint::load_newest_valid(dir_, expected, &rejected, key(), checks);
  std::optional<checkpoint::Loaded> loaded_other =
      checkpoint::load_newest_valid(dir_, other, &rejected_other, key(), checks);
  if (loaded_other && (!loaded || loaded_other->header.step > loaded->header.step)) {
    rejected = std::move(rejected_other);
    return loaded_other;
  }
  return loaded;
}

checkpoint::CandidateChecks Checkpointer::candidate_checks(const TrainingState& state) const {
  checkpoint::CandidateChecks checks;
  // Before the arrays: a signed run needs its key, and a file of another experiment is
  // refused outright (UsageError), never passed over for an older one.
  checks.header = [this](const std::filesystem::path& path, const checkpoint::Header& header) {
    if (header.mac_present && !key_)
      throw UsageError(path.string() +
                       ": the run was signed (its checkpoints carry a MAC) and this launch has "
                       "no key: resume with the key it was signed with (--checkpoint-key FILE "
                       "or RINGTRAIN_CHECKPOINT_KEY_FILE)");
    check_same_experiment(header.config_json, config_json_, path.string());
  };
  // After: values a seal cannot vouch for (a damaged or forged file is passed over), then the
  // data order and data the state refers to.
  checks.loaded = [this, &state](const checkpoint::Loaded& loaded) {
    try {
      check_state_values(loaded.tree, loaded.header, loaded.path.string());
    } catch (const UsageError& e) {
      throw checkpoint::CheckpointError(e.what());
    }
    try {
      check_compatible(loaded.tree, state);
      check_same_data(loaded.header.config_json, config_json_);
    } catch (const UsageError& e) {
      throw UsageError(loaded.path.string() + ": " + e.what());
    }
  };
  return checks;
}

std::optional<checkpoint::Loaded> Checkpointer::load_for_resume(
    const TrainingState& state, const std::string& what,
    const std::function<void(const std::string&)>& report) {
  // The residual's values do not matter to the schema, only its shape (N x M).
  const std::vector<float> residual_shape(
      state.feedback ? state.feedback->residual().size() * std::size_t(comm_.size()) : 0);
  const checkpoint::Expected expected = checkpoint::Expected::of(
      capture(state, gather_optimizer_state(comm_, state), nullptr, residual_shape));
  // A file written with a split plan (--local-batches auto) or without one loads either way.
  const checkpoint::Expected other = toggle_split_plan(expected);
  const checkpoint::CandidateChecks checks = candidate_checks(state);
  if (what != "auto") {
    checkpoint::Loaded l;
    l.path = what;
    checks.header(l.path, checkpoint::read_header_contained(what, key()));
    try {
      l.tree = checkpoint::read_file_contained(what, expected, &l.header, key());
    } catch (const checkpoint::CheckpointError& first) {
      try {
        l.tree = checkpoint::read_file_contained(what, other, &l.header, key());
      } catch (const checkpoint::CheckpointError&) {
        throw first;  // the reason under this run's own schema
      }
    }
    checks.loaded(l);
    return l;
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(dir_, ec)) return std::nullopt;  // a first launch
  std::vector<std::string> rejected;
  std::optional<checkpoint::Loaded> loaded = load_newest_of_both(expected, other, rejected, checks);
  const std::size_t files = checkpoint::list_checkpoints(dir_).size();
  // Checkpoints that this launch accepts none of are a run's data, not "no checkpoint":
  // starting at step 0 would overwrite its records and prune its files.
  if (!loaded && files > 0) {
    std::string reasons;
    for (const std::string& r : rejected) reasons += (reasons.empty() ? "" : "; ") + r;
    throw UsageError(fmt::format(
        "--resume auto: {} holds {} checkpoint file{} and this launch accepts none: {}. "
        "Nothing was changed; fix what the reasons say, or start over with another --run-dir",
        dir_.string(), files, files == 1 ? "" : "s", reasons));
  }
  if (comm_.rank() == 0)
    for (const std::string& r : rejected) report("skipping checkpoint " + r);
  return loaded;
}

std::optional<std::filesystem::path> Checkpointer::resume(
    const TrainingState& state, const std::string& what,
    const std::function<void(const std::string&)>& report) {
  std::optional<checkpoint::Loaded> loaded;
  std::string error;
  bool usage = false;  // the user's to fix (another experiment, no key, nothing accepted)
  try {
    loaded = load_for_resume(state, what, report);
  } catch (const UsageError& e) {
    error = e.what();
    usage = true;
  } catch (const std::exception& e) {
    error = e.what();
  }
  // What the user must fix (exit 2 on every rank) before what failed (exit 1).
  fail_together<UsageError>(comm_, usage ? error : "");
  fail_together<AgreedError>(comm_, error.empty() ? "" : "cannot resume: " + error);
  // All ranks must continue from the same step (or all start fresh: step 0 = none found).
  const std::uint64_t step = loaded ? loaded->header.step + 1 : 0;  // +1: step 0 is a real step
  std::uint64_t lo = 0, hi = 0;
  collectives::allreduce_min_max(comm_, step, lo, hi);
  if (lo != hi)
    throw AgreedError(
        fmt::format("ranks found different checkpoints to resume from (steps {} to {}): "
                    "is {} the same folder on every node?",
                    lo == 0 ? 0 : lo - 1, hi - 1, dir_.string()));
  if (!loaded) return std::nullopt;
  if (loaded->header.version < 2 && comm_.rank() == 0)
    report(loaded->path.string() +
           ": format version 1 (no seal): loaded without the whole-file digest and table of "
           "contents check");
  restore(loaded->tree, state);
  restore_residual(loaded->tree, state, comm_.rank(), comm_.size());
  resumed_header_ = loaded->header;
  // A save interrupted after its rename (commit.hpp, steps 4-5) left the file we resume from
  // without LATEST naming it: finish that save's protocol now. Every rank is done reading.
  if (what == "auto") {
    if (comm_.rank() == 0) {
      try {
        std::optional<std::filesystem::path> latest;
        try {
          latest = checkpoint::read_latest(dir_);
        } catch (const checkpoint::CheckpointError&) {
          // a garbage LATEST was reported above; it is replaced here
        }
        if (!latest || latest->filename() != loaded->path.filename()) {
          checkpoint::update_latest(dir_, loaded->path.filename());
          prune();
          report("LATEST now names " + loaded->path.filename().string() +
                 " (its save was interrupted before LATEST moved, or LATEST was unusable)");
        }
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
    fail_together<AgreedError>(comm_, error.empty() ? "" : "cannot resume: " + error);
  }
  return loaded->path;
}

}  // namespace ringtrain
