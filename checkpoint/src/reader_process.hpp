// The parent's side of the contained reader (contained.hpp): the settings enable_contained_
// reader() stored, one reader child process and the pipes to it, the child started ahead, and
// the request's common part. contained.cpp (checkpoints) and contained_data.cpp (users' HDF5
// datasets) build their operations on it. Private to the checkpoint module.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "posix_io.hpp"
#include "ringtrain/checkpoint/contained.hpp"
#include "wire.hpp"

namespace ringtrain::checkpoint::detail {

struct ReaderSettings {
  std::filesystem::path executable;
  ReaderLimits limits;
};
// nullopt until enable_contained_reader().
std::optional<ReaderSettings>& reader_settings();

// Both ends of a pipe, closed on destruction unless released.
struct Pipe {
  int fd[2] = {-1, -1};
  explicit Pipe(const std::filesystem::path& file);
  ~Pipe() { close_both(); }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  void close_end(int i);
  void close_both() { close_end(0), close_end(1); }
};

// One reader child. Started (it prepares libhdf5 and waits), then sent one request, then its
// reply is read (whole, or in pieces) and the child reaped. Between send() and the reply the
// parent is free: it checks the seal while the child parses. A child never reaped is killed.
class ReaderChild {
 public:
  // `file`: named in the error if the child cannot start.
  explicit ReaderChild(const std::filesystem::path& file);
  ~ReaderChild();
  ReaderChild(const ReaderChild&) = delete;
  ReaderChild& operator=(const ReaderChild&) = delete;

  void send(const std::filesystem::path& file, const std::string& request);
  // Reads the reply to its end and reaps the child (finish()). Throws CheckpointError if the
  // child died, exceeded a limit or sent nothing.
  std::string reply();
  // Up to out_bytes bytes of the reply, at least one unless the reply ended (then 0). Throws
  // CheckpointError (the child killed) when the wall-clock limit passes first.
  std::size_t read_some(char* out, std::size_t out_bytes);
  // After the reply's end: reaps the child; throws CheckpointError if it died by a signal or
  // a limit ("the HDF5 library crashed while reading it (SIGSEGV): refused") or exited
  // non-zero.
  void finish();

 private:
  std::filesystem::path file_;
  Pipe to_child_, from_child_;
  pid_t pid_ = -1;
  std::chrono::steady_clock::time_point deadline_;
};

// The child started ahead if there is one, else a new one; `request` sent to it.
std::unique_ptr<ReaderChild> child_for(const std::filesystem::path& file,
                                       const std::string& request);
// The child prepare_contained_reader() started, if any.
std::unique_ptr<ReaderChild>& standby_child();

// The file the parent reads: checked to be a regular file, opened once, so that the seal
// and the arrays the child located are read through the same descriptor.
ReadOnlyFile open_regular(const std::filesystem::path& file);

// The request's common part (wire.hpp): protocol, operation, file, key, limits (the child's
// address space: twice the file plus the configured headroom). An operation appends its own.
std::string request_head(Operation op, const std::filesystem::path& file, const ReadOnlyFile& raw,
                         const MacKey* key);

// Status first: a refusal becomes the CheckpointError the child raised.
WireReader open_reply(const std::filesystem::path& file, const std::string& reply);

}  // namespace ringtrain::checkpoint::detail
