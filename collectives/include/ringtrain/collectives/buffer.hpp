// A float buffer for data that travels through the ring, backed by transparent huge pages.
//
// Why it matters: for messages above ~32 KiB MPICH/UCX copies between processes with one
// kernel call (cross-memory attach, process_vm_readv), which looks up and pins every page of
// the message. With 4 KiB pages a 64 MiB allreduce pins 16,384 pages per direction; with
// 2 MiB pages, 32, which makes large ring allreduces markedly faster (bench/README-allreduce.md,
// "Huge pages"). The buffer is aligned to 2 MiB and madvise(MADV_HUGEPAGE)d
// when it is at least that large (the kernel may still decline: it is advice, not a demand).
//
// Ownership: RAII, move-only; span() lends the elements. Contents start zeroed.
#pragma once

#include <cstddef>
#include <span>

namespace ringtrain::collectives {

class HugePageBuffer {
 public:
  HugePageBuffer() = default;
  // Throws std::bad_alloc if the memory cannot be had.
  explicit HugePageBuffer(std::size_t num_elements);
  ~HugePageBuffer();
  HugePageBuffer(HugePageBuffer&& other) noexcept;
  HugePageBuffer& operator=(HugePageBuffer&& other) noexcept;
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;

  std::span<float> span() { return {data_, size_}; }
  std::span<const float> span() const { return {data_, size_}; }
  float* data() { return data_; }
  std::size_t size() const { return size_; }

 private:
  float* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace ringtrain::collectives
