// libFuzzer target: a .npy file from untrusted bytes, through the header parser alone and
// through read_npy (mapping, the data's size against the shape). Every outcome but a
// ringtrain::Error or a normal return is a finding; a returned array must lie in the file.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "fuzz_input.hpp"
#include "ringtrain/framework/data/npy.hpp"
#include "ringtrain/framework/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> bytes(data, size);
  try {
    const auto header = ringtrain::data::parse_npy_header(bytes, "input.npy");
    if (header.data_offset > size) std::abort();  // the header cannot end past the input
  } catch (const ringtrain::Error&) {
  }
  const auto file = ringtrain::fuzz::write_input("input.npy", data, size);
  try {
    const ringtrain::data::StoredArray array = ringtrain::data::read_npy(file);
    const auto stored = array.bytes();
    if (array.offset + stored.size() != size) std::abort();  // exactly the file's data
    volatile std::uint8_t sink = 0;
    for (std::uint8_t b : stored) sink = sink ^ b;  // every byte handed out is readable
  } catch (const ringtrain::Error&) {
  }
  return 0;
}
