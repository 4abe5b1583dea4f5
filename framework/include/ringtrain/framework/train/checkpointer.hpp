// Checkpointer: the collective side of checkpoints — who writes, when ranks agree, what a
// resume loads. The file format and the commit steps are checkpoint/'s.
//
// save(), on every rank (collective):
//   1. snapshot: the ranks gather a sharded optimizer state to rank 0, which copies the
//      whole state into a tree it owns (training may change the live state after this)
//   2. rank 0 writes step-XXXXXXXX.h5.partial, fsynced       a failed write: the .partial is
//                                                            removed, nothing is committed
//   3. rank 0 renames it to step-XXXXXXXX.h5 and fsyncs the folder   crash before: .partial ignored
//   4. rank 0 moves LATEST to it (temp file + rename + fsync)        crash before: LATEST is old
//   5. rank 0 prunes beyond the newest K that verify                 crash during: files stay valid
//      (files named like checkpoints that do not verify are reported once, never counted)
//   6. all ranks agree that steps 2-5 succeeded (one allreduce)      every rank blocks as long
// start_save() and finish_save() split the same save in two (--checkpoint-async): start_save
// takes the snapshot (step 1, collective) and hands steps 2-5 to a writer thread on rank 0;
// training goes on meanwhile. finish_save (step 6, collective) waits for the writer. Only
// one save is in flight; the writer thread makes every HDF5 call while it runs (Debian's
// HDF5 is not thread-safe, and training makes none). A kill at any moment of the background
// write leaves the files of steps 2-5 above, from which a resume takes the newest that
// verifies.
// Where the shards of --zero 1 (and the bf16 wire residuals) reach rank 0 in start_save:
//   kSnapshot  step 1 gathers them with collectives (MPI_Gatherv), training waits for it
//   kWriter    step 1 copies each rank's part into a buffer of the save and sends it without
//              waiting (shard_transfer.hpp); the training thread completes the messages at
//              step boundaries (poll) and at finish_save, and rank 0's writer thread, woken
//              when they are complete, assembles the full state before step 2. The writer
//              makes no MPI call: the process stays within MPI_THREAD_SERIALIZED although
//              the training thread calls MPI outside the ring lock between steps.
// Synchronous saves (save()) always gather in the snapshot. Only rank 0 holds the full state.
// A save that fails is reported, not thrown: the caller decides whether training goes on
// (the previous durable checkpoint stays the restart point).
// resume(), on every rank: each rank loads the newest checkpoint that verifies (or the given
// file), then the ranks agree on the step they loaded (MIN/MAX allreduce): all or none resume.
// With "auto", rank 0 then points LATEST at the file it resumed from if LATEST named another
// (a save killed between its rename and LATEST) and prunes: the interrupted save is finished.
// With a key (--checkpoint-key FILE, or $RINGTRAIN_CHECKPOINT_KEY_FILE), every save carries a
// keyed MAC and resume refuses any file not signed with that key.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "ringtrain/checkpoint/commit.hpp"
#include "ringtrain/checkpoint/file.hpp"
#include "ringtrain/checkpoint/key.hpp"
#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/framework/train/modes.hpp"
#include "ringtrain/framework/train/training_state.hpp"

namespace ringtrain {

class ShardTransfer;  // shard_transfer.hpp: a save's shards on their way to rank 0

// What a save did, the same on every rank except for `failure`'s text and blocked_s.
struct SaveOutcome {
  std::uint64_t step = 0;  // the step the checkpoint holds
  double blocked_s = 0.0;  // seconds this call blocked this rank
  double persist_s = 0.0;  // rank 0: snapshot start to durable commit (or to the failure)
  bool durable = false;    // the checkpoint is committed and LATEST names it
  std::string failure;     // why not (rank 0's reason; the others point to rank 0)
};

class Checkpointer {
 public:
  // dir: <run-dir>/checkpoints (created by rank 0). keep: newest K checkpoints kept.
  // key_file: the MAC key (--checkpoint-key); empty: $RINGTRAIN_CHECKPOINT_KEY_FILE if set,
  // else no key. Collective (the ranks agree that the key loaded). Throws AgreedError if the
  // key file is refused (missing, readable by group or others, not 32 bytes).
  // gather: where an asynchronous save's shards reach rank 0 (above); the default is the
  // trainer's (--zero-gather writer, config.hpp).
  Checkpointer(const collectives::Communicator& comm, std::filesystem::path dir, std::size_t keep,
               std::string config_json, const std::filesystem::path& key_file = {},
               ZeroGather gather = ZeroGather::kWriter);

  // Completes the messages and joins a writer thread still in flight (its outcome is not
  // reported).
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // Collective. Every rank waits for rank 0's commit, so blocked_s is about the same on all.
  // If rank 0 could not write or commit, no rank throws: the outcome is not durable, and no
  // .partial is left behind. No save may be in flight.
  SaveOutcome save(const TrainingState& state, std::uint64_t epoch);

  // Collective: the snapshot of an asynchronous save; rank 0 writes it in the background.
  // Returns the seconds it blocked this rank. No save may be in flight.
  double start_save(const TrainingState& state, std::uint64_t epoch);
  // True between start_save and finish_save (the same on every rank).
  bool in_flight() const { return in_flight_; }
  // Collective: waits until the save in flight is durable or failed; its outcome, with
  // blocked_s the wait. Fails as save() does, without throwing.
  SaveOutcome finish_save();
  // Training thread, at a step boundary: completes the messages of a kWriter save in flight
  // if they have arrived (MPI_Testall, local) and then wakes the writer. Cheap when none is.
  void poll();

  // Collective. `what` is "auto" (newest that verifies in dir) or a file path. Returns the
  // loaded path, or nullopt if "auto" found no checkpoint file at all (a fresh start). Every
  // rejected file is reported through `report` with its name and reason (rank 0 only).
  // A candidate must verify, hold values within what its configuration allows
  // (state_values.hpp), and belong to this experiment (experiment.hpp); a signed run's files
  // need the key. Throws UsageError (exit 2, nothing changed) for a file of another
  // experiment, a signed file without a key, or checkpoint files of which "auto" accepts
  // none (each listed with its reason); AgreedError if an explicit file fails or the ranks
  // loaded different steps.
  std::optional<std::filesystem::path> resume(
      const TrainingState& state, const std::string& what,
      const std::function<void(const std::string&)>& report);

  // After resume() loaded a file: its header (step, world size, the configuration it was
  // written with); before, or after a fresh start: nullopt.
  const std::optional<checkpoint::Header>& resumed_header() const { return resumed_header_; }

  const std::filesystem::path& dir() const { return dir_; }
  // True if saves are signed (and resumes demand the signature).
  bool signs() const { return key_.has_value(); }

 private:
  // What a save writes: the file's header and the state, owned (rank 0's tree only).
  struct Snapshot {
    double start_s = 0.0;
    checkpoint::Header header;
    checkpoint::StateTree tree;
  };
  // Collective. deferred: the shards are sent to the writer (kWriter), not gathered here.
  Snapshot snapshot(const TrainingState& state, std::uint64_t epoch, bool deferred = false);
  // Rank 0's writer thread: waits for the shards if deferred, completes the tree, persists.
  void write_in_background(bool deferred);
  // Rank 0's writer thread: false if the save was abandoned before its shards arrived.
  bool await_shards();
  void shards_arrived(bool abandoned = false);  // wakes the writer
  // Rank 0: steps 2-5 of the protocol. "" if durable, else why (and the .partial is gone).
  std::string persist(const Snapshot& snap) const;
  // Rank 0: step 5, reporting files that do not verify on stderr (once each).
  void prune() const;
  // Collective: every rank learns rank 0's error and persist time.
  SaveOutcome agree(std::uint64_t step, const std::string& error, double persist_s) const;
  const checkpoint::MacKey* key() const;  // nullptr without a key
  // What a resume asks of each candidate file (resume() lists the rules).
  checkpoint::CandidateChecks candidate_checks(const TrainingState& state) const;
  std::optional<checkpoint::Loaded> load_newest_of_both(
      const checkpoint::Expected& expected, const checkpoint::Expected& other,
      std::vector<std::string>& rejected, const checkpoint::CandidateChecks& checks) const;
  // Rank-local part of resume(): the file to continue from, or nullopt for a fresh start.
  std::optional<checkpoint::Loaded> load_for_resume(
      const TrainingState& state, const std::string& what,
      const std::function<void(const std::string&)>& report);

  const collectives::Communicator& comm_;
  std::filesystem::path dir_;
  std::size_t keep_;
  std::string config_json_;
  std::optional<checkpoint::MacKey> key_;
  std::optional<checkpoint::Header> resumed_header_;
  // Rank 0: the last snapshot's tree, whose storage the next one reuses.
  checkpoint::StateTree spare_tree_;
  // The save in flight. The snapshot, writer_error_ and writer_persist_s_ are the writer
  // thread's until it is joined.
  bool in_flight_ = false;
  Snapshot in_flight_snapshot_;
  std::thread writer_;
  std::string writer_error_;
  double writer_persist_s_ = 0.0;
  // kWriter: the messages of the save in flight, what its tree still lacks, and the writer's
  // wake-up (arrived_/abandoned_ under arrival_mutex_).
  ZeroGather gather_;
  std::unique_ptr<ShardTransfer> transfer_;
  DeferredState deferred_;
  std::mutex arrival_mutex_;
  std::condition_variable arrival_;
  bool arrived_ = false, abandoned_ = false;
  // Rank 0: the unverified files already reported by prune().
  mutable std::mutex garbage_mutex_;
  mutable std::set<std::string> garbage_reported_;
};

}  // namespace ringtrain
