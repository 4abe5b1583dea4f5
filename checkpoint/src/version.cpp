// Library identity for manifests and checkpoint roots.
#include "ringtrain/checkpoint/version.hpp"

#include <hdf5.h>

namespace ringtrain::checkpoint {

#define RINGTRAIN_STRINGIFY_(x) #x
#define RINGTRAIN_STRINGIFY(x) RINGTRAIN_STRINGIFY_(x)

// "1.10.8" (H5_VERS_INFO would be "HDF5 library version: 1.10.8").
const char* hdf5_version() {
  return RINGTRAIN_STRINGIFY(H5_VERS_MAJOR) "." RINGTRAIN_STRINGIFY(
      H5_VERS_MINOR) "." RINGTRAIN_STRINGIFY(H5_VERS_RELEASE);
}

}  // namespace ringtrain::checkpoint
