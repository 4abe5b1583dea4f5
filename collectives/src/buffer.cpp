// Huge-page backed float buffer (see buffer.hpp).
#include "ringtrain/collectives/buffer.hpp"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace ringtrain::collectives {

namespace {
constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;
}

HugePageBuffer::HugePageBuffer(std::size_t num_elements) : size_(num_elements) {
  if (num_elements == 0) return;
  const std::size_t bytes = num_elements * sizeof(float);
  if (bytes >= kHugePageBytes) {
    // aligned_alloc wants a size that is a multiple of the alignment.
    const std::size_t rounded = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
    data_ = static_cast<float*>(std::aligned_alloc(kHugePageBytes, rounded));
    if (data_ == nullptr) throw std::bad_alloc();
    madvise(data_, rounded, MADV_HUGEPAGE);  // advice only: failure just means small pages
  } else {
    data_ = static_cast<float*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
    if (data_ == nullptr) throw std::bad_alloc();
  }
  std::memset(data_, 0, bytes);  // also faults the pages in, outside any timed region
}

HugePageBuffer::~HugePageBuffer() { std::free(data_); }

HugePageBuffer::HugePageBuffer(HugePageBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

HugePageBuffer& HugePageBuffer::operator=(HugePageBuffer&& other) noexcept {
  if (this != &other) {
    std::free(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

}  // namespace ringtrain::collectives
