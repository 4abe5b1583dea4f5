// StoredArray and MappedFile (stored_array.hpp): the bytes of a user's array, mapped or in
// memory, and the one size check every reader applies before it maps or allocates.
#include "ringtrain/framework/data/stored_array.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ringtrain/framework/error.hpp"

namespace ringtrain::data {

const char* to_string(DType dtype) {
  switch (dtype) {
    case DType::kUint8:
      return "uint8";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    default:
      return "float32";
  }
}

std::size_t item_bytes(DType dtype) {
  switch (dtype) {
    case DType::kUint8:
      return 1;
    case DType::kInt64:
      return 8;
    default:
      return 4;
  }
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
  ::close(fd);  // the mapping keeps the file
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::uint8_t*>(data_), size_);
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
