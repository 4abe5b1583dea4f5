// Library identity for manifests and checkpoint roots.
#include "ringtrain/checkpoint/version.hpp"

#include <hdf5.h>

namespace ringtrain::checkpoint {

const char* hdf5_version() { return H5_VERS_INFO; }

}  // namespace ringtrain::checkpoint
