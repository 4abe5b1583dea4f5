// HDF5 reader for user datasets: the arrays /train/x, /train/y, /test/x, /test/y of one file
// and its optional root attribute `classes`.
//
// Sits before training starts (user_data.hpp). A contiguous dataset without filters or
// external storage is mapped where it lies in the file; a chunked, compressed or compact one
// is read into memory. The file is untrusted: libhdf5 parses it in a contained reader child
// when the program enabled that (ringtrain does; checkpoint/data_file.hpp lists the checks:
// hard links, dtype, byte order, rank, allocated storage, stored size against the file, a
// compression ratio cap, the memory limit), all before anything is mapped or allocated here.
// A file that crashes libhdf5 is refused: "the HDF5 library crashed while reading it".
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "ringtrain/framework/data/stored_array.hpp"

namespace ringtrain::data {

struct Hdf5Arrays {
  std::vector<StoredArray> arrays;      // in the order of the names asked for
  std::vector<bool> present;            // parallel: false for an optional name not in the file
  std::optional<std::int64_t> classes;  // the root attribute `classes`, if present
};

// True if `file` starts with the HDF5 signature (\x89HDF\r\n\x1a\n).
bool is_hdf5_file(const std::filesystem::path& file);

// Reads the datasets `names` ("/train/x", ...) of `file`. Throws DataError naming the file and
// dataset: not HDF5, a name missing or not a hard link to a dataset, an unsupported dtype, a
// big-endian type, a rank of 0 or above 8, storage outside the file, external or not
// allocated, a stored size other than the shape's (or, compressed, more than 1032 times
// smaller), a dataset to be read whose bytes exceed `memory_limit_bytes` (0: this machine's
// memory), a bad `classes`, a crash of libhdf5 in the contained reader. Bit i of `optional`
// set: names[i] may be missing (present[i] false, arrays[i] empty).
Hdf5Arrays read_hdf5_arrays(const std::filesystem::path& file,
                            const std::vector<std::string>& names,
                            std::uint64_t memory_limit_bytes = 0, std::uint64_t optional = 0);

}  // namespace ringtrain::data
