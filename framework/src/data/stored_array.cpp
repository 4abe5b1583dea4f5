// StoredArray and MappedFile (stored_array.hpp): the bytes of a user's array, mapped or in
// memory, and the one size check every reader applies before it maps or allocates.
#include "ringtrain/framework/data/stored_array.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "ringtrain/framework/error.hpp"

namespace ringtrain::data {

namespace {

struct DTypeFacts {
  DType dtype;
  const char* name;
  std::size_t bytes;
};
constexpr DTypeFacts kDTypes[] = {
    {DType::kBool, "bool", 1},       {DType::kInt8, "int8", 1},
    {DType::kUint8, "uint8", 1},     {DType::kInt16, "int16", 2},
    {DType::kUint16, "uint16", 2},   {DType::kInt32, "int32", 4},
    {DType::kUint32, "uint32", 4},   {DType::kInt64, "int64", 8},
    {DType::kUint64, "uint64", 8},   {DType::kFloat16, "float16", 2},
    {DType::kFloat32, "float32", 4}, {DType::kFloat64, "float64", 8},
};

constexpr bool in_enum_order() {
  for (std::size_t i = 0; i < std::size(kDTypes); ++i)
    if (static_cast<std::size_t>(kDTypes[i].dtype) != i) return false;
  return true;
}
static_assert(in_enum_order(), "kDTypes lists the dtypes in the order of the enum");

const DTypeFacts& facts(DType dtype) {
  return kDTypes[static_cast<std::size_t>(dtype)];
}

}  // namespace

const char* to_string(DType dtype) {
  return facts(dtype).name;
}

std::size_t item_bytes(DType dtype) {
  return facts(dtype).bytes;
}

bool is_floating(DType dtype) {
  return dtype == DType::kFloat16 || dtype == DType::kFloat32 || dtype == DType::kFloat64;
}

MappedFile::MappedFile(const std::filesystem::path& file) : path_(file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw DataError(fmt::format("{}: cannot open: {}", file.string(), std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw DataError(fmt::format("{}: not a regular file", file.string()));
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw DataError(
          fmt::format("{}: cannot map {} bytes: {}", file.string(), size_, std::strerror(err)));
    }
    data_ = static_cast<const std::uint8_t*>(p);
  }
  fd_ = fd;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::uint8_t*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
}

bool MappedFile::shrank() const {
  struct stat st {};
  return ::fstat(fd_, &st) == 0 && static_cast<std::uint64_t>(st.st_size) < size_;
}

std::string MappedFile::shrank_message() const {
  struct stat st {};
  const long long now = ::fstat(fd_, &st) == 0 ? static_cast<long long>(st.st_size) : -1;
  return fmt::format(
      "{}: the file shrank to {} bytes while the run had it mapped ({} bytes when "
      "loaded): its data can no longer be read; the run stops here, its last "
      "checkpoint is kept (restore the file and resume)",
      path_.string(), now, size_);
}

namespace {

// The read_mapped() of this thread, if one is running: where a SIGBUS jumps back to.
thread_local sigjmp_buf* t_mapped_read = nullptr;
struct sigaction g_previous_sigbus {};

void on_sigbus(int signal, siginfo_t* info, void* context) {
  if (sigjmp_buf* back = t_mapped_read) {
    t_mapped_read = nullptr;
    siglongjmp(*back, 1);
  }
  // Not ours: hand the fault to whoever handled it before (the instruction runs again).
  sigaction(SIGBUS, &g_previous_sigbus, nullptr);
  (void)signal, (void)info, (void)context;
}

void install_sigbus_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = on_sigbus;
    // SA_NODEFER: the handler leaves by siglongjmp without restoring the signal mask
    // (sigsetjmp(.., 0) is cheap), so SIGBUS must not be blocked while it runs.
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    sigaction(SIGBUS, &action, &g_previous_sigbus);
  });
}

}  // namespace

bool read_mapped(const std::function<void()>& read) {
  install_sigbus_handler();
  sigjmp_buf back;
  if (sigsetjmp(back, 0) != 0) return false;  // a SIGBUS inside read()
  t_mapped_read = &back;
  read();
  t_mapped_read = nullptr;
  return true;
}

std::uint64_t StoredArray::items() const {
  std::uint64_t n = 1;
  for (std::uint64_t d : shape) n *= d;  // checked by checked_stored_bytes when read
  return n;
}

std::span<const std::uint8_t> StoredArray::bytes() const {
  const std::size_t n = static_cast<std::size_t>(items() * item_bytes(dtype));
  if (mapping) return mapping->bytes().subspan(offset, n);
  return std::span<const std::uint8_t>(memory).first(n);
}

std::uint64_t memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? std::uint64_t(pages) * std::uint64_t(page) : UINT64_MAX;
}

std::uint64_t checked_stored_bytes(const std::vector<std::uint64_t>& shape, std::size_t item_size,
                                   std::uint64_t limit_bytes, const std::string& where,
                                   const std::string& why) {
  std::uint64_t bytes = item_size;
  for (std::uint64_t d : shape) {
    if (d != 0 && bytes > limit_bytes / d)
      throw DataError(fmt::format("{}: shape ({}) of {}-byte items is larger than {}", where,
                                  fmt::join(shape, ", "), item_size, why));
    bytes *= d;
  }
  if (bytes > limit_bytes)
    throw DataError(fmt::format("{}: shape ({}) of {}-byte items needs {} bytes, more than {}",
                                where, fmt::join(shape, ", "), item_size, bytes, why));
  return bytes;
}

}  // namespace ringtrain::data
