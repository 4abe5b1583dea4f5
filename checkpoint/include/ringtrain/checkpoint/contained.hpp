// The contained reader: checkpoints that come from outside the running job (`--resume FILE`,
// `inspect`, the candidates of `--resume auto`) are parsed by libhdf5 in a child process,
// because libhdf5 is not hardened against crafted files: a file that overflows
// a buffer or segfaults inside H5Fopen kills the child, not the job. The parent reports
//
//   "<file>: the HDF5 library crashed while reading it (SIGSEGV): refused"
//
// and goes on as for any bad file (`--resume auto` tries the next one).
//
// How. The parent checks the seal with plain reads (seal.hpp), then starts the same
// executable (posix_spawn of /proc/self/exe) with the hidden first argument
// kReaderSubcommand; main() hands such a process to serve_contained_reader() before MPI or
// anything else starts. The child sets its own CPU-time and memory limits (setrlimit), reads
// the request (operation, file, key, expected schema) from its stdin, runs every check of
// read_file / verify_file / describe_file, and writes the verified result to its stdout.
// The parent parses that reply as untrusted too: exactly the expected entries, kinds and
// shapes, and their checksums and the sealed table of contents recomputed from the values.
// A wall-clock limit in the parent ends a child that hangs.
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

// From now on the *_contained functions of this process spawn `executable` (normally
// "/proc/self/exe", which must serve kReaderSubcommand). Call once, before threads start.
void enable_contained_reader(const std::filesystem::path& executable,
                             const ReaderLimits& limits = {});
bool contained_reader_enabled();

// As read_file / verify_file / describe_file (file.hpp), in a child when enabled. Throw
// CheckpointError naming the file: the child's own refusal, or its death by a signal or a
// limit. Not thread-safe; rank-local (not collective).
StateTree read_file_contained(const std::filesystem::path& path, const Expected& expected,
                              Header* header_out = nullptr, const MacKey* key = nullptr);
VerifyResult verify_file_contained(const std::filesystem::path& path, const MacKey* key = nullptr);
std::string describe_file_contained(const std::filesystem::path& path, const MacKey* key = nullptr);

// The child: argv as main() received it (argv[1] == kReaderSubcommand). Returns the exit
// code after writing the reply and closing stdout; the caller should then _Exit with it
// (nothing else is left to do). Never returns after a crash, of course: that is the point.
int serve_contained_reader(int argc, char** argv);

}  // namespace ringtrain::checkpoint
