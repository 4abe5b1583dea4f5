// libFuzzer target: a checkpoint file from untrusted bytes through read_file (with the
// expectation of the seed files' tree), verify_file and describe_file. Built with
// RINGTRAIN_FUZZING: the seal's length, digests and table of contents are not checked, so
// that mutations reach libhdf5 and the module's own checks. Every outcome but a
// CheckpointError or a normal return is a finding.
#include <cstddef>
#include <cstdint>

#include "fuzz_input.hpp"
#include "ringtrain/checkpoint/error.hpp"
#include "ringtrain/checkpoint/file.hpp"

using namespace ringtrain::checkpoint;

namespace {

// The layout of the seed files (tests/fuzz/corpus/checkpoint).
Expected seed_schema() {
  Expected expected;
  expected.add_array(Group::kModel, "layers.0.linear/weight", {3, 4});
  expected.add_array(Group::kModel, "layers.0.linear/bias", {3});
  expected.add(Group::kOptimizer, "step", Kind::kUInt64);
  expected.add(Group::kData, "position", Kind::kInt64);
  expected.add(Group::kRng, "state", Kind::kString);
  expected.add(Group::kProgress, "loss_sum", Kind::kFloat64);
  return expected;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const Expected expected = seed_schema();
  const auto file = ringtrain::fuzz::write_input("checkpoint.h5", data, size);
  try {
    Header header;
    (void)read_file(file, expected, &header);
  } catch (const CheckpointError&) {
  }
  try {
    (void)verify_file(file);
  } catch (const CheckpointError&) {
  }
  try {
    (void)describe_file(file);
  } catch (const CheckpointError&) {
  }
  return 0;
}
