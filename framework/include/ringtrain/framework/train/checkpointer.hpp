// Checkpointer: the collective side of checkpoints — who writes, when ranks agree, what a
// resume loads. The file format and the commit steps are checkpoint/'s.
//
// save(), on every rank (collective):
//   1. rank 0 captures the state and writes step-XXXXXXXX.h5.partial, fsynced
//   2. all ranks agree that the write succeeded (one allreduce)     a failed write: no commit,
//                                                                    the .partial is removed
//   3. rank 0 renames it to step-XXXXXXXX.h5 and fsyncs the folder   crash before: .partial ignored
//   4. rank 0 moves LATEST to it (temp file + rename + fsync)        crash before: LATEST is old
//   5. rank 0 prunes beyond the newest K                             crash during: files stay valid
//   6. all ranks agree that steps 3-5 succeeded (one allreduce)      every rank blocks as long
// A save that fails is reported, not thrown: the caller decides whether training goes on
// (the previous durable checkpoint stays the restart point).
// resume(), on every rank: each rank loads the newest checkpoint that verifies (or the given
// file), then the ranks agree on the step they loaded (MIN/MAX allreduce): all or none resume.
// With "auto", rank 0 then points LATEST at the file it resumed from if LATEST named another
// (a save killed between its rename and LATEST) and prunes: the interrupted save is finished.
// With a key (--checkpoint-key FILE, or $RINGTRAIN_CHECKPOINT_KEY_FILE), every save carries a
// keyed MAC and resume refuses any file not signed with that key.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "ringtrain/checkpoint/file.hpp"
#include "ringtrain/checkpoint/key.hpp"
#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/framework/train/training_state.hpp"

namespace ringtrain {

// What a save did, the same on every rank except for `failure`'s text.
struct SaveOutcome {
  double blocked_s = 0.0;  // seconds the save blocked this rank: the save cost C
  bool durable = false;    // the checkpoint is committed and LATEST names it
  std::string failure;     // why not (rank 0's reason; the others point to rank 0)
};

class Checkpointer {
 public:
  // dir: <run-dir>/checkpoints (created by rank 0). keep: newest K checkpoints kept.
  // key_file: the MAC key (--checkpoint-key); empty: $RINGTRAIN_CHECKPOINT_KEY_FILE if set,
  // else no key. Collective (the ranks agree that the key loaded). Throws AgreedError if the
  // key file is refused (missing, readable by group or others, not 32 bytes).
  Checkpointer(const collectives::Communicator& comm, std::filesystem::path dir, std::size_t keep,
               std::string config_json, const std::filesystem::path& key_file = {});

  // Collective. Every rank waits for rank 0's commit, so blocked_s is about the same on all.
  // If rank 0 could not write or commit, no rank throws: the outcome is not durable, and no
  // .partial is left behind.
  SaveOutcome save(const TrainingState& state, std::uint64_t epoch);

  // Collective. `what` is "auto" (newest that verifies in dir) or a file path. Returns the
  // loaded path, or nullopt if "auto" found none (a fresh start). Every rejected file is
  // reported through `report` with its name and reason (rank 0 only). Throws AgreedError if
  // an explicit file fails or the ranks loaded different steps.
  std::optional<std::filesystem::path> resume(
      const TrainingState& state, const std::string& what,
      const std::function<void(const std::string&)>& report);

  const std::filesystem::path& dir() const { return dir_; }
  // True if saves are signed (and resumes demand the signature).
  bool signs() const { return key_.has_value(); }

 private:
  const checkpoint::MacKey* key() const;  // nullptr without a key

  const collectives::Communicator& comm_;
  std::filesystem::path dir_;
  std::size_t keep_;
  std::string config_json_;
  std::optional<checkpoint::MacKey> key_;
};

}  // namespace ringtrain
