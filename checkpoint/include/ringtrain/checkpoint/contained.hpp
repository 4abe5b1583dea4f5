// The contained reader: checkpoints that come from outside the running job (`--resume FILE`,
// `inspect`, the candidates of `--resume auto`) are parsed by libhdf5 in a child process,
// because libhdf5 is not hardened against crafted files: a file that overflows
// a buffer or segfaults inside H5Fopen kills the child, not the job. The parent reports
//
//   "<file>: the HDF5 library crashed while reading it (SIGSEGV): refused"
//
// and goes on as for any bad file (`--resume auto` tries the next one).
//
// How. The parent starts the reader executable (posix_spawn of ringtrain-checkpoint-reader,
// a small static program built with the checkpoint module; or of /proc/self/exe, which then
// must hand argv[1] == kReaderSubcommand to serve_contained_reader() before MPI or anything
// else starts). The child sets its own CPU-time and memory limits (setrlimit), reads the
// request (operation, file, key, expected schema) from its stdin, runs every check of
// read_file / verify_file / describe_file except the seal's pass over the content, and
// writes the result to its stdout. Meanwhile the parent checks the whole seal with plain
// reads (seal.hpp). The parent parses the reply as untrusted too: exactly the expected
// entries, kinds and shapes. A read's reply carries small values, but for each contiguous
// array only where it lies in the file: the parent reads those bytes itself (no HDF5) and
// checks them against the stored xxh3; the sealed table of contents is then recomputed
// from the values. A wall-clock limit in the parent ends a child that hangs.
//
// Only a process that called enable_contained_reader() contains its reads (the ringtrain
// executable does); elsewhere (unit tests) the *_contained functions read in-process.
#pragma once

#include <filesystem>
#include <string>

#include "ringtrain/checkpoint/file.hpp"
#include "ringtrain/checkpoint/key.hpp"
#include "ringtrain/checkpoint/state_tree.hpp"

namespace ringtrain::checkpoint {

// argv[1] of a reader child. main() must test for it first thing.
inline constexpr const char* kReaderSubcommand = "__checkpoint-reader";
// Test hook, not a user setting: a reader child whose file name equals this variable's value
// (or any file if the value is "*") raises SIGSEGV where HDF5 would open the file.
inline constexpr const char* kReaderCrashVariable = "RINGTRAIN_TEST_READER_CRASH";

struct ReaderLimits {
  double wall_s = 600.0;  // the parent kills a child that runs longer (SIGKILL)
  double cpu_s = 300.0;   // RLIMIT_CPU in the child (SIGXCPU)
  // RLIMIT_AS in the child: this much beyond twice the file size (not under sanitizers).
  std::uint64_t memory_headroom_bytes = std::uint64_t{2} << 30;
};

// The dedicated reader executable, installed next to ringtrain.
inline constexpr const char* kReaderExecutable = "ringtrain-checkpoint-reader";
// kReaderExecutable in the directory of the running program if it is there and executable;
// otherwise "/proc/self/exe" (the running program must then serve kReaderSubcommand).
std::filesystem::path default_reader_executable();

// From now on the *_contained functions of this process spawn `executable` (normally
// default_reader_executable()). Call once, before threads start.
void enable_contained_reader(const std::filesystem::path& executable,
                             const ReaderLimits& limits = {});
bool contained_reader_enabled();
// Back to in-process reads (benchmarks compare the two in one process); a child started
// ahead is ended.
void disable_contained_reader();

// Starts a reader child now, to be used by the next *_contained call: a fresh process needs
// a few milliseconds (mostly page faults) before libhdf5 opens a file fast, which a child
// started ahead spends while the caller does other work. Does nothing if one is waiting
// or the contained reader is not enabled. Call it as soon as a read is known to come
// (ringtrain: when a run resumes, before it loads the data).
void prepare_contained_reader();

// As read_file / verify_file / describe_file / read_header (file.hpp), in a child when
// enabled; a header's mac_present is what this process's own seal check found. Throw
// CheckpointError naming the file: the child's own refusal, or its death by a signal or a
// limit. Not thread-safe; rank-local (not collective).
StateTree read_file_contained(const std::filesystem::path& path, const Expected& expected,
                              Header* header_out = nullptr, const MacKey* key = nullptr);
VerifyResult verify_file_contained(const std::filesystem::path& path, const MacKey* key = nullptr);
std::string describe_file_contained(const std::filesystem::path& path, const MacKey* key = nullptr);
Header read_header_contained(const std::filesystem::path& path, const MacKey* key = nullptr);

// The child: argv as main() received it (argv[1] == kReaderSubcommand). Prepares libhdf5,
// then waits for its request on stdin. Returns the exit code after writing the reply and
// closing stdout; the caller should then _Exit with it (nothing else is left to do).
// Never returns after a crash, of course: that is the point.
int serve_contained_reader(int argc, char** argv);

}  // namespace ringtrain::checkpoint
