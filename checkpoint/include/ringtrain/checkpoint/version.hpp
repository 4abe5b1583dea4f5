// Checkpoint format identity, written at the root of every checkpoint file.
#pragma once

namespace ringtrain::checkpoint {

inline constexpr const char* kFormatName = "ringtrain-checkpoint";
// Version 2 adds the seal (a 512-byte user block, file.hpp). Version 1 files (no seal) are
// still read; the callers print a one-line notice when they load one.
inline constexpr int kFormatVersion = 2;
inline constexpr int kOldestReadableVersion = 1;

// The HDF5 library version this module was built against, "1.10.8".
const char* hdf5_version();

}  // namespace ringtrain::checkpoint
