// The contained reader's child side (contained.hpp): a process started to parse one
// untrusted checkpoint with libhdf5. It prepares the library, waits for its one request on
// stdin, sets its CPU-time and memory limits, runs the ordinary readers (file_read.cpp,
// file_verify.cpp) and writes the reply to stdout. The parent checks the seal's content
// digest and MAC meanwhile, and reads the arrays this process located.
#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "contained_data.hpp"
#include "hdf5_handle.hpp"
#include "posix_io.hpp"
#include "reader.hpp"
#include "ringtrain/checkpoint/contained.hpp"
#include "seal.hpp"
#include "wire.hpp"

namespace ringtrain::checkpoint {
namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t kMaxRequestBytes = std::uint64_t{1} << 30;

void set_limit(int resource, rlim_t value) {
  const rlimit limit{value, value};
  ::setrlimit(resource, &limit);
}

// Libraries loaded with the executable (UCX, when it is ringtrain itself) install handlers
// that print a backtrace and may try to recover; a reader child should just die and let
// the parent report it.
void default_crash_signals() {
  for (int signal : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(signal, SIG_DFL);
}

// Memory the library frees stays in the heap instead of going back to the kernel, so
// that the real read reuses the pages the warm-up touched: a fresh page costs a fault,
// and faults are most of a fresh process's first H5Fopen.
void keep_freed_memory() {
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

void apply_limits(std::uint64_t cpu_s, std::uint64_t memory_bytes) {
  set_limit(RLIMIT_CPU, static_cast<rlim_t>(cpu_s));
#if !defined(__SANITIZE_ADDRESS__) && !defined(RINGTRAIN_FUZZING)
  // AddressSanitizer reserves terabytes of address space: no RLIMIT_AS under it.
  set_limit(RLIMIT_AS, static_cast<rlim_t>(memory_bytes));
#else
  (void)memory_bytes;
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

// A read: the values of small entries, and where each contiguous array lies in the file
// (the parent reads those bytes itself: no bulk data crosses the pipe).
void serve_read(const fs::path& file, const Expected& expected, const MacKey* key,
                detail::Wire& out) {
  Header header;
  std::vector<std::optional<detail::ArrayExtent>> extents;
  const StateTree tree = detail::read_file_locating(file, expected, &header, key, &extents);
  out.reserve(tree.payload_bytes() + header.config_json.size() + 64 * expected.entries().size() +
              4096);
  out.u64(detail::kOk);
  detail::put_header(out, header);
  auto value = tree.entries().begin();
  for (const std::optional<detail::ArrayExtent>& extent : extents) {
    if (!extent) {
      out.u64(detail::kValue);
      detail::put_entry(out, *value++);
      continue;
    }
    out.u64(detail::kExtent);
    out.u64(extent->offset);
    out.u64(extent->bytes);
    out.u64(extent->xxh3);
  }
}

// Runs the request (wire.hpp); writes the reply's result part (after kOk) to `out`, or, for a
// data file, the whole reply to stdout itself (returns true then).
bool serve(detail::WireReader& in, detail::Wire& out) {
  if (in.u64() != detail::kProtocol)
    throw CheckpointError("(request)",
                          "the contained reader executable belongs to another ringtrain build");
  const auto op = static_cast<detail::Operation>(in.u64());
  const fs::path file = in.text(kMaxNameBytes * 4);
  std::optional<MacKey> key;
  if (in.u64() == 1) {
    std::array<unsigned char, MacKey::kBytes> bytes{};
    in.raw(bytes.data(), bytes.size());
    key = MacKey::from_bytes(bytes);
  }
  const std::uint64_t cpu_s = in.u64(), memory_bytes = in.u64();
  apply_limits(cpu_s, memory_bytes);
  const MacKey* k = key ? &*key : nullptr;
  crash_if_asked(file);
  switch (op) {
    case detail::Operation::kRead:
      serve_read(file, detail::get_schema(in), k, out);
      return false;
    case detail::Operation::kVerify:
      out.u64(detail::kOk);
      detail::put_verify(out, verify_file(file, k));
      return false;
    case detail::Operation::kDescribe:
      out.u64(detail::kOk);
      out.text(describe_file(file, k));
      return false;
    case detail::Operation::kHeader:
      out.u64(detail::kOk);
      detail::put_header(out, read_header(file, k));
      return false;
    case detail::Operation::kData:
      detail::serve_data_file(file, in, STDOUT_FILENO);
      return true;
  }
  throw CheckpointError(file, "unknown contained reader operation");
}

}  // namespace

int serve_contained_reader(int /*argc*/, char** /*argv*/) {
  default_crash_signals();
  // The parent checks the seal's content digest and MAC while this process runs.
  detail::leave_content_to_parent();
  keep_freed_memory();
  detail::warm_up_library();  // before the request: a reader started ahead is ready
  const std::string request = read_stdin();
  detail::Wire out;
  try {
    detail::WireReader in(request, "(request)");
    if (serve(in, out)) {
      ::close(STDOUT_FILENO);
      return 0;
    }
  } catch (const CheckpointError& e) {
    out = detail::Wire();
    out.u64(detail::kRefused);
    out.text(e.reason());
    out.text(e.hdf5_stack());
  } catch (const std::bad_alloc&) {
    out = detail::Wire();
    out.u64(detail::kRefused);
    out.text("reading it exceeded the contained reader's memory limit: refused");
    out.text("");
  }
  const bool sent = detail::write_to_pipe(STDOUT_FILENO, out.bytes());
  ::close(STDOUT_FILENO);  // the parent sees the end of the reply now, not at our exit
  return sent ? 0 : 1;
}

}  // namespace ringtrain::checkpoint
