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
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "format.hpp"
#include "posix_io.hpp"
#include "seal.hpp"
#include "wire.hpp"

extern char** environ;

namespace ringtrain::checkpoint {
namespace fs = std::filesystem;

namespace {

enum class Operation : std::uint64_t { kRead = 1, kVerify = 2, kDescribe = 3 };
constexpr std::uint64_t kOk = 0, kRefused = 1;
constexpr std::uint64_t kMaxRequestBytes = std::uint64_t{1} << 30;
constexpr int kPipeBytes = 1 << 20;

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

// Writes all of `bytes`; false if the child closed its end (it died): SIGPIPE is blocked
// for this thread during the write and a pending one is consumed.
bool write_all(int fd, const std::string& bytes) {
  sigset_t pipe_signal, previous;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, &previous);
  bool ok = true;
  for (std::size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ok = false;
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  if (!ok) {
    const timespec zero{0, 0};
    sigtimedwait(&pipe_signal, nullptr, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  return ok;
}

// Reads until EOF or the deadline; false on timeout. `out` should be reserved by the caller.
bool read_all(int fd, std::string& out, std::chrono::steady_clock::time_point deadline) {
  std::vector<char> buffer(std::size_t{1} << 20);
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
    if (std::strncmp(*e, "OPENBLAS_NUM_THREADS=", 21) != 0) env.emplace_back(*e);
  env.emplace_back("OPENBLAS_NUM_THREADS=1");  // the child computes nothing: no BLAS threads
  return env;
}

// Runs one request in a child and returns its reply; throws CheckpointError if the child
// could not start, died, exceeded a limit or sent nothing.
std::string run_child(const fs::path& file, const std::string& request,
                      std::size_t reply_bytes_hint = 1 << 16) {
  const Settings& s = *settings();
  const std::uint64_t file_bytes = fs::file_size(file);
  const std::uint64_t memory = 2 * file_bytes + s.limits.memory_headroom_bytes;
  const std::string cpu = std::to_string(static_cast<long long>(std::ceil(s.limits.cpu_s)));
  const std::string mem = std::to_string(memory);
  std::vector<std::string> args = {s.executable.string(), kReaderSubcommand, cpu, mem};
  std::vector<std::string> env = child_environment();
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  for (auto& e : env) envp.push_back(e.data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);

  Pipe to_child(file), from_child(file);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, to_child.fd[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, from_child.fd[1], STDOUT_FILENO);
  pid_t pid = -1;
  const int spawned =
      posix_spawn(&pid, s.executable.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0)
    throw CheckpointError(file, "cannot start the contained reader " + s.executable.string() +
                                    ": " + std::strerror(spawned));
  to_child.close_end(0);
  from_child.close_end(1);
  // A 1 MiB pipe (Linux's default maximum for unprivileged processes) instead of 64 KiB: the
  // reply crosses in 16 times fewer hand-overs between the two processes.
  ::fcntl(from_child.fd[0], F_SETPIPE_SZ, kPipeBytes);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(s.limits.wall_s));
  write_all(to_child.fd[1], request);  // a child that died early is reported below
  to_child.close_end(1);
  std::string reply;
  reply.reserve(reply_bytes_hint);
  const bool finished = read_all(from_child.fd[0], reply, deadline);
  if (!finished) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!finished)
    throw CheckpointError(file, "reading it took longer than " + std::to_string(s.limits.wall_s) +
                                    " s in the contained reader: refused");
  if (WIFSIGNALED(status))
    throw CheckpointError(file, "the HDF5 library crashed while reading it (" +
                                    signal_text(WTERMSIG(status)) + "): refused");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || reply.empty())
    throw CheckpointError(file, "the contained reader failed (exit status " +
                                    std::to_string(WEXITSTATUS(status)) + "): refused");
  return reply;
}

// The parent's own plain-read seal check, before any child starts; nullopt: version 1.
std::optional<detail::Seal> check_seal_here(const fs::path& file, const MacKey* key) {
  std::error_code error;
  const auto status = fs::status(file, error);
  if (!fs::exists(status)) throw CheckpointError(file, "does not exist");
  if (!fs::is_regular_file(status)) throw CheckpointError(file, "not a regular file");
  const detail::ReadOnlyFile raw(file);
  if (detail::starts_with_seal(raw, file)) return detail::check_seal(raw, file, key);
  detail::refuse_unsealed_with_key(file, key);
  return std::nullopt;
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

std::string request(Operation op, const fs::path& file, const MacKey* key) {
  detail::Wire wire;
  wire.u64(static_cast<std::uint64_t>(op));
  wire.text(file.string());
  wire.u64(key != nullptr ? 1 : 0);
  if (key != nullptr) wire.raw(key->bytes().data(), key->bytes().size());
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

// ---- the child -----------------------------------------------------------------------------

void set_limit(int resource, rlim_t value) {
  const rlimit limit{value, value};
  ::setrlimit(resource, &limit);
}

// Libraries loaded with the executable (UCX) install handlers that print a backtrace and
// may try to recover; a reader child should just die and let the parent report it.
void default_crash_signals() {
  for (int signal : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(signal, SIG_DFL);
}

void apply_limits(int argc, char** argv) {
  if (argc < 4) return;
  set_limit(RLIMIT_CPU, static_cast<rlim_t>(std::strtoull(argv[2], nullptr, 10)));
#if !defined(__SANITIZE_ADDRESS__) && !defined(RINGTRAIN_FUZZING)
  // AddressSanitizer reserves terabytes of address space: no RLIMIT_AS under it.
  set_limit(RLIMIT_AS, static_cast<rlim_t>(std::strtoull(argv[3], nullptr, 10)));
#endif
  set_limit(RLIMIT_CORE, 0);  // a crash on a hostile file leaves no core dump behind
}

std::string read_stdin() {
  std::string in;
  std::vector<char> buffer(std::size_t{1} << 16);
  for (;;) {
    const ssize_t n = ::read(STDIN_FILENO, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return in;
    in.append(buffer.data(), static_cast<std::size_t>(n));
    if (in.size() > kMaxRequestBytes) return {};
  }
}

void crash_if_asked(const fs::path& file) {
  const char* target = std::getenv(kReaderCrashVariable);
  if (target != nullptr && (std::string(target) == "*" || file.filename() == target))
    ::raise(SIGSEGV);
}

// Runs the request; the reply's result part (after kOk).
void serve(detail::WireReader& in, detail::Wire& out) {
  const auto op = static_cast<Operation>(in.u64());
  const fs::path file = in.text(kMaxNameBytes * 4);
  std::optional<MacKey> key;
  if (in.u64() == 1) {
    std::array<unsigned char, MacKey::kBytes> bytes{};
    in.raw(bytes.data(), bytes.size());
    key = MacKey::from_bytes(bytes);
  }
  const MacKey* k = key ? &*key : nullptr;
  crash_if_asked(file);
  switch (op) {
    case Operation::kRead: {
      const Expected expected = detail::get_schema(in);
      Header header;
      const StateTree tree = read_file(file, expected, &header, k);
      // One allocation for the whole reply: the payload and a few words per entry.
      out.reserve(tree.payload_bytes() + header.config_json.size() + 64 * tree.size() + 4096);
      out.u64(kOk);
      detail::put_header(out, header);
      for (const Entry& entry : tree.entries()) detail::put_entry(out, entry);
      return;
    }
    case Operation::kVerify:
      out.u64(kOk);
      return detail::put_verify(out, verify_file(file, k));
    case Operation::kDescribe:
      out.u64(kOk);
      return out.text(describe_file(file, k));
  }
  throw CheckpointError(file, "unknown contained reader operation");
}

}  // namespace

void enable_contained_reader(const fs::path& executable, const ReaderLimits& limits) {
  settings() = Settings{executable, limits};
}

bool contained_reader_enabled() {
  return settings().has_value();
}

StateTree read_file_contained(const fs::path& path, const Expected& expected, Header* header_out,
                              const MacKey* key) {
  if (!contained_reader_enabled()) return read_file(path, expected, header_out, key);
  const std::optional<detail::Seal> seal = check_seal_here(path, key);
  std::string message = request(Operation::kRead, path, key);
  detail::Wire schema;
  detail::put_schema(schema, expected);
  message += schema.bytes();
  std::uint64_t payload_bytes = 0;
  for (const ExpectedEntry& e : expected.entries())
    payload_bytes += e.kind == Kind::kFloat32Array ? 4 * *checked_num_elements(e.shape) : 64;
  const std::string reply =
      run_child(path, message, payload_bytes + 64 * expected.entries().size() + (1 << 16));
  detail::WireReader in = open_reply(path, reply);
  const Header header = detail::get_header(in);
  StateTree tree;
  std::vector<detail::TocEntry> toc;
  for (const ExpectedEntry& e : expected.entries()) {
    detail::get_entry(in, e, tree);
    toc.push_back({e.group, e.name, e.kind, e.shape, detail::entry_xxh3(tree.entries().back())});
  }
  if (!in.done()) in.bad("bytes after the last entry");
  check_against_seal(path, seal, std::move(toc));
  if (header_out != nullptr) *header_out = header;
  return tree;
}

VerifyResult verify_file_contained(const fs::path& path, const MacKey* key) {
  if (!contained_reader_enabled()) return verify_file(path, key);
  const std::optional<detail::Seal> seal = check_seal_here(path, key);
  const std::string reply = run_child(path, request(Operation::kVerify, path, key));
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
  check_seal_here(path, key);
  const std::string reply = run_child(path, request(Operation::kDescribe, path, key));
  detail::WireReader in = open_reply(path, reply);
  return in.text(kMaxStringBytes);
}

int serve_contained_reader(int argc, char** argv) {
  default_crash_signals();
  apply_limits(argc, argv);
  const std::string request = read_stdin();
  detail::Wire out;
  try {
    detail::WireReader in(request, "(request)");
    serve(in, out);
  } catch (const CheckpointError& e) {
    out = detail::Wire();
    out.u64(kRefused);
    out.text(e.reason());
    out.text(e.hdf5_stack());
  } catch (const std::bad_alloc&) {
    out = detail::Wire();
    out.u64(kRefused);
    out.text("reading it exceeded the contained reader's memory limit: refused");
    out.text("");
  }
  const bool sent = write_all(STDOUT_FILENO, out.bytes());
  ::close(STDOUT_FILENO);  // the parent sees the end of the reply now, not at our exit
  return sent ? 0 : 1;
}

}  // namespace ringtrain::checkpoint
