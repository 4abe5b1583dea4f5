// Checkpoint format identity, written at the root of every checkpoint file (DESIGN §5).
#pragma once

namespace ringtrain::checkpoint {

inline constexpr const char* kFormatName = "ringtrain-checkpoint";
inline constexpr int kFormatVersion = 1;

// The HDF5 library version this module was built against, "1.10.8".
const char* hdf5_version();

}  // namespace ringtrain::checkpoint
