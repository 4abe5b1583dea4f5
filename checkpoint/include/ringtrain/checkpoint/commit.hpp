// The atomic commit of a checkpoint and the retention of old ones, as separate
// steps so that the trainer can put the cross-rank agreement between them. Rank 0 runs them;
// nothing here is collective. The protocol, in the order the trainer calls it:
//
//   1. write_partial  dir/step-00000200.h5.partial, closed and fsynced
//   2. (trainer)      all ranks agree that the save succeeded
//   3. commit         rename to dir/step-00000200.h5, fsync dir
//   4. update_latest  dir/LATEST.tmp <- "step-00000200.h5\n", fsync, rename over LATEST, fsync dir
//   5. prune          remove verified checkpoints beyond the newest K verified ones (never
//                     LATEST's target) and stray *.partial / LATEST.tmp files; files named
//                     like checkpoints that do not verify are reported, neither counted nor
//                     removed
//
// A crash between any two steps leaves a directory from which newest_valid() resumes: the
// committed checkpoint with the highest step that verifies (not necessarily LATEST's). A
// name is "committed" iff it matches step-<8 or more digits>.h5; nothing else in the
// directory is ever read as a checkpoint.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ringtrain/checkpoint/file.hpp"
#include "ringtrain/checkpoint/state_tree.hpp"

namespace ringtrain::checkpoint {

inline constexpr const char* kLatestName = "LATEST";

// "step-00000200.h5" (8 digits, more if the step needs them).
std::filesystem::path checkpoint_name(std::uint64_t step);
// The step of a committed checkpoint's file name; nullopt for any other name (incl. *.partial).
std::optional<std::uint64_t> parse_checkpoint_name(const std::filesystem::path& file_name);

// Step 1. Writes dir/<checkpoint_name(step)>.partial (write_file: closed and fsynced) and
// returns its path, sealed with a MAC if `key`. header.step must equal `step`. Throws
// CheckpointError.
// Crash during or after: only a *.partial exists, which no reader trusts; prune removes it.
std::filesystem::path write_partial(const std::filesystem::path& dir, std::uint64_t step,
                                    const Header& header, const StateTree& tree,
                                    const MacKey* key = nullptr);

// Step 3. Renames `partial` (in `dir`, named "*.h5.partial") to its final name and fsyncs
// `dir`; returns the final path. Something other than a regular file by the final name (a
// directory, a FIFO) is refused, not replaced. Throws CheckpointError.
// Crash before the rename: as after step 1. Crash after the rename but before the directory
// fsync: the rename may or may not survive; either way the file under either name is whole
// (it was fsynced before), and LATEST still names the previous checkpoint; a resume takes
// the new file if its name survived (newest_valid goes by step, not by LATEST).
std::filesystem::path commit(const std::filesystem::path& dir,
                             const std::filesystem::path& partial);

// Step 4. Points LATEST at `final_name` (a file name in `dir`) atomically: LATEST.tmp is
// created new (O_EXCL), written and fsynced, renamed over LATEST, and `dir` fsynced
// (files/output.hpp). A LATEST that is not a regular file is refused and nothing is left
// behind. Throws CheckpointError.
// Crash before the rename: LATEST names the previous checkpoint (still present: prune has
// not run) and LATEST.tmp is a stray file; the new checkpoint is whole and is resumed from.
// Crash after: LATEST names the new one.
void update_latest(const std::filesystem::path& dir, const std::filesystem::path& final_name);

// The checkpoint LATEST names, as dir/<name>; nullopt if LATEST is absent. LATEST is opened
// without blocking or following a link and must be a small regular file (a FIFO there
// does not hang the reader). Throws CheckpointError if LATEST is not a regular file, is
// unreadable, too long or does not hold a checkpoint name (its bytes shown escaped).
std::optional<std::filesystem::path> read_latest(const std::filesystem::path& dir);

// Step 5. Keeps the `keep` newest committed checkpoints (by step) that verify, and the one
// LATEST names; removes the other ones that verify, every *.partial and LATEST.tmp.
// "Verify": a sealed file's whole seal checks with plain reads (length, content digest, the
// MAC with `key`); a version-1 file passes verify_file_contained. Each file is read once per
// process (a file this process committed is known good). A file that does not verify is
// neither counted nor removed: it is appended to *unverified (if given) as "<file name>:
// <reason>". keep >= 1. Returns the removed paths. Throws CheckpointError.
// Crash midway: some old files remain; the next prune removes them. Removals need no
// directory fsync: a removal that is undone by a crash leaves a valid old checkpoint.
std::vector<std::filesystem::path> prune(const std::filesystem::path& dir, std::size_t keep,
                                         std::vector<std::string>* unverified = nullptr,
                                         const MacKey* key = nullptr);

// Committed checkpoints in `dir`, newest step first (ignores *.partial, LATEST and any name
// that does not match the pattern). Empty if `dir` does not exist.
std::vector<std::filesystem::path> list_checkpoints(const std::filesystem::path& dir);

// The checkpoint to resume from: the committed checkpoint with the highest step that reads
// and verifies against `expected` (read_file, all checksums) and whose header step matches
// its name, trying each newest first. LATEST does not decide: after a crash between commit
// and update_latest the newest file is whole but LATEST still names the previous one. Each
// file that fails is appended to *rejected (if given) as "<file name>: <reason>", and so is
// a LATEST that is unreadable or names a missing file ("LATEST: <reason>"). nullopt if none
// verifies. With `key`, a file without a valid MAC fails ("not signed with this key").
// Each candidate is read by read_file_contained (contained.hpp): in a child process when the
// program enabled that, so a file that crashes libhdf5 is one more rejected candidate.
std::optional<std::filesystem::path> newest_valid(const std::filesystem::path& dir,
                                                  const Expected& expected,
                                                  std::vector<std::string>* rejected = nullptr,
                                                  const MacKey* key = nullptr);

// The same search, keeping what was read, so the trainer reads the chosen file only once.
struct Loaded {
  std::filesystem::path path;
  Header header;
  StateTree tree;
};
// The caller's own rules for a candidate of load_newest_valid. Each may throw CheckpointError
// to pass over the file (it joins *rejected with the reason), or any other exception to end
// the search there (it propagates: a file of another experiment must not be passed over).
struct CandidateChecks {
  // Before the arrays are read (read_header_contained: seal, format, root attributes).
  std::function<void(const std::filesystem::path&, const Header&)> header;
  // After the whole file was read and verified.
  std::function<void(const Loaded&)> loaded;
};
std::optional<Loaded> load_newest_valid(const std::filesystem::path& dir, const Expected& expected,
                                        std::vector<std::string>* rejected = nullptr,
                                        const MacKey* key = nullptr,
                                        const CandidateChecks& checks = {});

// Removes the .partial of `step` in `dir` if there is one (a save that failed leaves
// nothing half-written behind). Throws CheckpointError if it exists and cannot be removed.
void remove_partial(const std::filesystem::path& dir, std::uint64_t step);

// Test hook for restart tests (the trainer exposes it as a hidden flag): `hook(phase)` is
// called after each durable step of the protocol so a test can SIGKILL the process there.
// One hook per process; pass an empty function to remove it. Not thread-safe (rank 0 only).
enum CrashPhase : int {
  kAfterPartialWritten = 1,  // write_partial: the .partial is closed and fsynced
  kAfterRename = 2,          // commit: renamed, directory not yet fsynced
  kAfterDirectorySync = 3,   // commit: directory fsynced
  kAfterLatest = 4,          // update_latest: LATEST renamed and directory fsynced
  kDuringPrune = 5,          // prune: after each removed file
};
void set_crash_hook(std::function<void(int phase)> hook);

}  // namespace ringtrain::checkpoint
