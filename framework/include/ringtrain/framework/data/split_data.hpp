// One split of a dataset for `ringtrain eval`: its samples, and its labels or targets where
// the data hold them (predictions need x only).
//
//   HDF5     /<split>/x and /<split>/y, or /x and /y (a file of one split); y may be absent
//   .npy     a folder with <split>_x.npy and <split>_y.npy, or x.npy and y.npy; y may be
//            absent; or one FILE.npy: x alone
//   IDX      the Fashion-MNIST folder's split (always labelled)
//
// The arrays are checked as load_data checks them (dtypes and their conversions, ranks,
// finite values, lengths, the memory limit); labels against the model's class count.
#pragma once

#include <filesystem>

#include "ringtrain/framework/data/user_data.hpp"

namespace ringtrain::data {

struct SplitData {
  Dataset data;   // Dataset::unlabelled > 0 when the data hold x only
  DataInfo info;  // path, layout, sample shape, classes or targets, arrays "<split>/x" [, y]
};

// Loads split `split` of `path` (empty: the Debian package's Fashion-MNIST folder). Labels
// must lie in [0, classes) (0: classes is the largest label + 1). Throws DataError naming the
// file: no x for the split ("<path>: no /test/x or /x"), any defect load_data refuses.
SplitData load_split(const std::filesystem::path& path, Split split, std::size_t classes,
                     const LoadOptions& options = {});

}  // namespace ringtrain::data
