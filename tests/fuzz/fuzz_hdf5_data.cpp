// libFuzzer target: a user's HDF5 dataset file (--data FILE.h5) from untrusted bytes, through
// the part of the contained data reader that runs libhdf5 (checkpoint/data_file.hpp, called
// in-process here: a data file has no seal to switch off). Every outcome but a
// CheckpointError or a normal return is a finding; a returned array must be what it claims:
// a mapped one inside the file, a read one exactly its shape's bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_input.hpp"
#include "ringtrain/checkpoint/data_file.hpp"
#include "ringtrain/checkpoint/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = ringtrain::fuzz::write_input("input.h5", data, size);
  const std::vector<std::string> names = {"/train/x", "/train/y", "/test/x", "/test/y"};
  try {
    // 64 MiB: a declared size above it is refused before anything is read.
    const auto parsed = ringtrain::checkpoint::read_data_file(file, names, std::uint64_t{64} << 20);
    if (parsed.arrays.size() != names.size()) std::abort();
    for (const auto& a : parsed.arrays) {
      std::uint64_t bytes = ringtrain::checkpoint::data_item_bytes(a.type);
      for (std::uint64_t d : a.shape) bytes *= d;  // checked by the reader: no overflow
      if (a.offset ? (*a.offset > size || bytes > size - *a.offset) : a.bytes.size() != bytes)
        std::abort();
    }
  } catch (const ringtrain::checkpoint::CheckpointError&) {
  }
  return 0;
}
