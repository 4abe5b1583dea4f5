// The contained reader (contained.hpp): the parent spawns a child of the same executable,
// sends it one request over a pipe, reads the reply from another, and turns the child's
// death by a signal or a limit into a refusal of the file. The child runs the ordinary
// readers (file_read.cpp, file_verify.cpp) under setrlimit.
//
// Vocabulary: request = (operation, file, key, expected schema); reply = status, then the
// refusal's reason or the verified result (wire.hpp encodes both).
#include "ringtrain/checkpoint/contained.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "format.hpp"
#include "posix_io.hpp"
#include "reader.hpp"
#include "seal.hpp"
#include "wire.hpp"

extern char** environ;

namespace ringtrain::checkpoint {
namespace fs = std::filesystem;

namespace {

using detail::kExtent;
using detail::kOk;
using detail::kProtocol;
using detail::kValue;
using detail::Operation;

struct Settings {
  fs::path executable;
  ReaderLimits limits;
};
std::optional<Settings>& settings() {
  static std::optional<Settings> value;
  return value;
}

// ---- the parent ----------------------------------------------------------------------------

// Both ends of a pipe, closed on destruction unless released.
struct Pipe {
  int fd[2] = {-1, -1};
  explicit Pipe(const fs::path& file) {
    if (::pipe2(fd, O_CLOEXEC) != 0)
      throw CheckpointError(
          file, std::string("cannot start the contained reader: pipe: ") + std::strerror(errno));
  }
  ~Pipe() { close_both(); }
  void close_end(int i) {
    if (fd[i] >= 0) ::close(fd[i]);
    fd[i] = -1;
  }
  void close_both() { close_end(0), close_end(1); }
};

std::string signal_text(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  std::string text = abbrev != nullptr ? std::string("SIG") + abbrev : std::to_string(signal);
  if (signal == SIGXCPU) text += ": CPU time limit";
  return text;
}

// Reads until EOF or the deadline; false on timeout. `out` should be reserved by the caller.
bool read_all(int fd, std::string& out, std::chrono::steady_clock::time_point deadline) {
  std::vector<char> buffer(std::size_t{1} << 16);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 60000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) continue;
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;
    out.append(buffer.data(), static_cast<std::size_t>(n));
  }
}

std::vector<std::string> child_environment() {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e)
    if (std::strncmp(*e, "OPENBLAS_NUM_THREADS=", 21) != 0 &&
        std::strncmp(*e, "HDF5_PLUGIN_PRELOAD=", 20) != 0)
      env.emplace_back(*e);
  env.emplace_back("OPENBLAS_NUM_THREADS=1");  // the child computes nothing: no BLAS threads
  // No HDF5 filter plugins: a crafted file must not make the child load a shared library
  // (ringtrain writes no filters and refuses them anyway).
  env.emplace_back("HDF5_PLUGIN_PRELOAD=::");
  return env;
}

// One reader child. Started (it prepares libhdf5 and waits), then sent one request, then
// asked once for its reply. Between send() and reply() the parent is free: it checks the
// seal while the child parses. A child never asked for its reply is killed and reaped.
class ReaderChild {
 public:
  // `file`: named in the error if the child cannot start.
  explicit ReaderChild(const fs::path& file);
  ~ReaderChild();
  ReaderChild(const ReaderChild&) = delete;
  ReaderChild& operator=(const ReaderChild&) = delete;

  void send(const fs::path& file, const std::string& request);
  // Reads the reply to its end and reaps the child. Throws CheckpointError if the child
  // died, exceeded a limit or sent nothing.
  std::string reply();

 private:
  fs::path file_;
  Pipe to_child_, from_child_;
  pid_t pid_ = -1;
  std::chrono::steady_clock::time_point deadline_;
};

ReaderChild::ReaderChild(const fs::path& file)
    : file_(file), to_child_(file), from_child_(file) {
  const Settings& s = *settings();
  std::vector<std::string> args = {s.executable.string(), kReaderSubcommand};
  std::vector<std::string> env = child_environment();
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  for (auto& e : env) envp.push_back(e.data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, to_child_.fd[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, from_child_.fd[1], STDOUT_FILENO);
  const int spawned =
      posix_spawn(&pid_, s.executable.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    pid_ = -1;
    throw CheckpointError(file, "cannot start the contained reader " + s.executable.string() +
                                    ": " + std::strerror(spawned));
  }
  to_child_.close_end(0);
  from_child_.close_end(1);
}

ReaderChild::~ReaderChild() {
  if (pid_ < 0) return;
  ::kill(pid_, SIGKILL);
  while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
}

void ReaderChild::send(const fs::path& file, const std::string& request) {
  file_ = file;
  deadline_ = std::chrono::steady_clock::now() +
              std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                  std::chrono::duration<double>(settings()->limits.wall_s));
  detail::write_to_pipe(to_child_.fd[1], request);  // a child that died is reported by reply()
  to_child_.close_end(1);
}

std::string ReaderChild::reply() {
  std::string reply;
  const bool finished = read_all(from_child_.fd[0], reply, deadline_);
  if (!finished) ::kill(pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  if (!finished)
    throw CheckpointError(file_, "reading it took longer than " +
                                     std::to_string(settings()->limits.wall_s) +
                                     " s in the contained reader: refused");
  if (WIFSIGNALED(status))
    throw CheckpointError(file_, "the HDF5 library crashed while reading it (" +
                                     signal_text(WTERMSIG(status)) + "): refused");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || reply.empty())
    throw CheckpointError(file_, "the contained reader failed (exit status " +
                                     std::to_string(WEXITSTATUS(status)) + "): refused");
  return reply;
}

// A child started ahead by prepare_contained_reader(), waiting for its request.
std::unique_ptr<ReaderChild>& standby() {
  static std::unique_ptr<ReaderChild> child;
  return child;
}

// The child started ahead if there is one, else a new one; `request` sent to it.
std::unique_ptr<ReaderChild> child_for(const fs::path& file, const std::string& request) {
  std::unique_ptr<ReaderChild> child = std::move(standby());
  if (!child) child = std::make_unique<ReaderChild>(file);
  child->send(file, request);
  return child;
}

// The file the parent reads: checked to be a regular file, opened once, so that the seal
// and the arrays the child located are read through the same descriptor.
detail::ReadOnlyFile open_regular(const fs::path& file) {
  std::error_code error;
  const auto status = fs::status(file, error);
  if (!fs::exists(status)) throw CheckpointError(file, "does not exist");
  if (!fs::is_regular_file(status)) throw CheckpointError(file, "not a regular file");
  return detail::ReadOnlyFile(file);
}

// The parent's own plain-read seal check, the whole of it (the child checks only the
// block); nullopt: version 1.
std::optional<detail::Seal> check_seal_here(const detail::ReadOnlyFile& raw, const fs::path& file,
                                            const MacKey* key) {
  if (detail::starts_with_seal(raw, file)) return detail::check_seal(raw, file, key);
  detail::refuse_unsealed_with_key(file, key);
  return std::nullopt;
}

// An array the child located: read here, through the parent's descriptor, and checked
// against the expected shape, the file's size and the stored xxh3 the child reported.
void read_extent(const detail::ReadOnlyFile& raw, const fs::path& file, const ExpectedEntry& e,
                 detail::WireReader& in, StateTree& tree) {
  const std::uint64_t offset = in.u64(), bytes = in.u64(), stored = in.u64();
  const std::string where = entry_path(e.group, e.name);
  if (e.kind != Kind::kFloat32Array) in.bad("a location for " + where + ", not an array");
  const std::uint64_t count = *checked_num_elements(e.shape);  // the expected shape: bounded
  const std::uint64_t file_bytes = raw.size();
  if (bytes != count * sizeof(float) || offset > file_bytes || bytes > file_bytes - offset)
    in.bad("a location for " + where + " of another size or beyond the file");
  std::vector<float> values(count);
  raw.read_at(offset, std::as_writable_bytes(std::span(values)));
  const std::uint64_t actual = detail::xxh3(values.data(), bytes);
  if (actual != stored) {
    char text[96];
    std::snprintf(text, sizeof text, "xxh3 of the data is %016llx, the attribute says %016llx",
                  static_cast<unsigned long long>(actual), static_cast<unsigned long long>(stored));
    throw CheckpointError(file, where + ": checksum mismatch (" + text + "): corrupt data");
  }
  tree.put_array(e.group, e.name, e.shape, std::move(values));
}

// The child's result must belong to the file the parent sealed-checked.
void check_against_seal(const fs::path& file, const std::optional<detail::Seal>& seal,
                        std::vector<detail::TocEntry> toc) {
  if (!seal) return;
  const std::size_t count = toc.size();
  if (count != seal->entry_count || detail::toc_digest(std::move(toc)) != seal->toc)
    throw CheckpointError(file,
                          "the contained reader's result does not match the sealed table "
                          "of contents: refused");
}

// The request's common part (wire.hpp); a read appends the schema.
std::string request(Operation op, const fs::path& file, const detail::ReadOnlyFile& raw,
                    const MacKey* key) {
  const ReaderLimits& limits = settings()->limits;
  detail::Wire wire;
  wire.u64(kProtocol);
  wire.u64(static_cast<std::uint64_t>(op));
  wire.text(file.string());
  wire.u64(key != nullptr ? 1 : 0);
  if (key != nullptr) wire.raw(key->bytes().data(), key->bytes().size());
  wire.u64(static_cast<std::uint64_t>(std::ceil(limits.cpu_s)));
  wire.u64(2 * raw.size() + limits.memory_headroom_bytes);
  return std::move(wire.bytes());
}

// Status first: a refusal becomes the CheckpointError the child raised.
detail::WireReader open_reply(const fs::path& file, const std::string& reply) {
  detail::WireReader in(reply, file);
  if (in.u64() == kOk) return in;
  std::string reason = in.text(kMaxStringBytes);
  std::string stack = in.text(kMaxStringBytes);
  throw CheckpointError(file, reason, stack);
}

}  // namespace

fs::path default_reader_executable() {
  std::error_code error;
  const fs::path self = fs::read_symlink("/proc/self/exe", error);
  if (!error) {
    const fs::path reader = self.parent_path() / kReaderExecutable;
    if (::access(reader.c_str(), X_OK) == 0) return reader;
  }
  return "/proc/self/exe";
}

void enable_contained_reader(const fs::path& executable, const ReaderLimits& limits) {
  settings() = Settings{executable, limits};
}

bool contained_reader_enabled() {
  return settings().has_value();
}

void prepare_contained_reader() {
  if (!contained_reader_enabled() || standby()) return;
  try {
    standby() = std::make_unique<ReaderChild>("(reader started ahead)");
  } catch (const CheckpointError&) {
    // The read itself starts one and reports why it cannot.
  }
}

StateTree read_file_contained(const fs::path& path, const Expected& expected, Header* header_out,
                              const MacKey* key) {
  if (!contained_reader_enabled()) return read_file(path, expected, header_out, key);
  const detail::ReadOnlyFile raw = open_regular(path);
  std::string message = request(Operation::kRead, path, raw, key);
  detail::Wire schema;
  detail::put_schema(schema, expected);
  message += schema.bytes();
  const std::unique_ptr<ReaderChild> child = child_for(path, message);
  // While the child parses, this process checks the seal.
  const std::optional<detail::Seal> seal = check_seal_here(raw, path, key);
  const std::string reply = child->reply();
  detail::WireReader in = open_reply(path, reply);
  const Header header = detail::get_header(in);
  StateTree tree;
  std::vector<detail::TocEntry> toc;
  for (const ExpectedEntry& e : expected.entries()) {
    const std::uint64_t tag = in.u64();
    if (tag == kExtent)
      read_extent(raw, path, e, in, tree);
    else if (tag == kValue)
      detail::get_entry(in, e, tree);
    else
      in.bad("an unknown entry tag");
    toc.push_back({e.group, e.name, e.kind, e.shape, detail::entry_xxh3(tree.entries().back())});
  }
  if (!in.done()) in.bad("bytes after the last entry");
  check_against_seal(path, seal, std::move(toc));
  if (header_out != nullptr) *header_out = header;
  return tree;
}

VerifyResult verify_file_contained(const fs::path& path, const MacKey* key) {
  if (!contained_reader_enabled()) return verify_file(path, key);
  const detail::ReadOnlyFile raw = open_regular(path);
  const auto child = child_for(path, request(Operation::kVerify, path, raw, key));
  const std::optional<detail::Seal> seal = check_seal_here(raw, path, key);
  const std::string reply = child->reply();
  detail::WireReader in = open_reply(path, reply);
  VerifyResult result = detail::get_verify(in);
  if (!in.done()) in.bad("bytes after the result");
  std::vector<detail::TocEntry> toc;
  for (const EntryInfo& e : result.entries)
    toc.push_back({e.group, e.name, e.kind, e.shape, e.xxh3});
  check_against_seal(path, seal, std::move(toc));
  return result;
}

std::string describe_file_contained(const fs::path& path, const MacKey* key) {
  if (!contained_reader_enabled()) return describe_file(path, key);
  const detail::ReadOnlyFile raw = open_regular(path);
  const auto child = child_for(path, request(Operation::kDescribe, path, raw, key));
  check_seal_here(raw, path, key);
  const std::string reply = child->reply();
  detail::WireReader in = open_reply(path, reply);
  return in.text(kMaxStringBytes);
}

}  // namespace ringtrain::checkpoint
