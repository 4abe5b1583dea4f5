// libFuzzer target: an IDX images file and an IDX labels file (gzip or not) from untrusted
// bytes. Every outcome but a ringtrain::Error or a normal return is a finding.
#include <cstddef>
#include <cstdint>

#include "fuzz_input.hpp"
#include "ringtrain/framework/data/idx.hpp"
#include "ringtrain/framework/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = ringtrain::fuzz::write_input("data-idx-ubyte", data, size);
  try {
    (void)ringtrain::data::read_idx_images(file, 28, 28);
  } catch (const ringtrain::Error&) {
  }
  try {
    (void)ringtrain::data::read_idx_labels(file, 10);
  } catch (const ringtrain::Error&) {
  }
  return 0;
}
