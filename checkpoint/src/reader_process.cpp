// The contained reader's parent side (reader_process.hpp): spawning a reader child, talking to
// it over two pipes, and turning its death by a signal or a limit into a refusal of the file.
#include "reader_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <vector>

#include "ringtrain/checkpoint/error.hpp"

extern char** environ;

namespace ringtrain::checkpoint::detail {
namespace fs = std::filesystem;

namespace {

std::string signal_text(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  std::string text = abbrev != nullptr ? std::string("SIG") + abbrev : std::to_string(signal);
  if (signal == SIGXCPU) text += ": CPU time limit";
  return text;
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

}  // namespace

std::optional<ReaderSettings>& reader_settings() {
  static std::optional<ReaderSettings> value;
  return value;
}

Pipe::Pipe(const fs::path& file) {
  if (::pipe2(fd, O_CLOEXEC) != 0)
    throw CheckpointError(
        file, std::string("cannot start the contained reader: pipe: ") + std::strerror(errno));
}

void Pipe::close_end(int i) {
  if (fd[i] >= 0) ::close(fd[i]);
  fd[i] = -1;
}

ReaderChild::ReaderChild(const fs::path& file) : file_(file), to_child_(file), from_child_(file) {
  const ReaderSettings& s = *reader_settings();
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
                  std::chrono::duration<double>(reader_settings()->limits.wall_s));
  write_to_pipe(to_child_.fd[1], request);  // a child that died is reported by finish()
  to_child_.close_end(1);
}

std::size_t ReaderChild::read_some(char* out, std::size_t out_bytes) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline_ - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      ::kill(pid_, SIGKILL);
      while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
      }
      pid_ = -1;
      throw CheckpointError(file_, "reading it took longer than " +
                                       std::to_string(reader_settings()->limits.wall_s) +
                                       " s in the contained reader: refused");
    }
    pollfd p{from_child_.fd[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 60000)));
    if (ready <= 0) continue;  // EINTR or no data yet
    const ssize_t n = ::read(from_child_.fd[0], out, out_bytes);
    if (n < 0 && errno == EINTR) continue;
    return n > 0 ? static_cast<std::size_t>(n) : 0;
  }
}

void ReaderChild::finish() {
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  if (WIFSIGNALED(status))
    throw CheckpointError(file_, "the HDF5 library crashed while reading it (" +
                                     signal_text(WTERMSIG(status)) + "): refused");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw CheckpointError(file_, "the contained reader failed (exit status " +
                                     std::to_string(WEXITSTATUS(status)) + "): refused");
}

std::string ReaderChild::reply() {
  std::string reply;
  std::vector<char> buffer(std::size_t{1} << 16);
  for (std::size_t n; (n = read_some(buffer.data(), buffer.size())) > 0;)
    reply.append(buffer.data(), n);
  finish();
  if (reply.empty())
    throw CheckpointError(file_, "the contained reader failed (no reply): refused");
  return reply;
}

std::unique_ptr<ReaderChild>& standby_child() {
  static std::unique_ptr<ReaderChild> child;
  return child;
}

std::unique_ptr<ReaderChild> child_for(const fs::path& file, const std::string& request) {
  std::unique_ptr<ReaderChild> child = std::move(standby_child());
  if (!child) child = std::make_unique<ReaderChild>(file);
  child->send(file, request);
  return child;
}

ReadOnlyFile open_regular(const fs::path& file) {
  std::error_code error;
  const auto status = fs::status(file, error);
  if (!fs::exists(status)) throw CheckpointError(file, "does not exist");
  if (!fs::is_regular_file(status)) throw CheckpointError(file, "not a regular file");
  return ReadOnlyFile(file);
}

std::string request_head(Operation op, const fs::path& file, const ReadOnlyFile& raw,
                         const MacKey* key) {
  const ReaderLimits& limits = reader_settings()->limits;
  Wire wire;
  wire.u64(kProtocol);
  wire.u64(static_cast<std::uint64_t>(op));
  wire.text(file.string());
  wire.u64(key != nullptr ? 1 : 0);
  if (key != nullptr) wire.raw(key->bytes().data(), key->bytes().size());
  wire.u64(static_cast<std::uint64_t>(std::ceil(limits.cpu_s)));
  wire.u64(2 * raw.size() + limits.memory_headroom_bytes);
  return std::move(wire.bytes());
}

WireReader open_reply(const fs::path& file, const std::string& reply) {
  WireReader in(reply, file);
  if (in.u64() == kOk) return in;
  std::string reason = in.text(kMaxStringBytes);
  std::string stack = in.text(kMaxStringBytes);
  throw CheckpointError(file, reason, stack);
}

}  // namespace ringtrain::checkpoint::detail
