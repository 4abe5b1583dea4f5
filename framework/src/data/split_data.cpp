// One split for `eval` (split_data.hpp): find its x and, if present, its y in the layout of
// --data, then check and convert them as load_data does.
#include "ringtrain/framework/data/split_data.hpp"

#include <fmt/format.h>

#include <optional>
#include <system_error>

#include "ringtrain/framework/data/convert.hpp"
#include "ringtrain/framework/data/hdf5_arrays.hpp"
#include "ringtrain/framework/data/npy.hpp"
#include "ringtrain/framework/error.hpp"

namespace ringtrain::data {
namespace fs = std::filesystem;

namespace {

struct Found {
  StoredArray x;
  std::optional<StoredArray> y;
};

// /<split>/x [/<split>/y], else /x [/y]: one request, every name optional.
Found find_hdf5(const fs::path& file, const std::string& split, const LoadOptions& options) {
  Hdf5Arrays h5 = read_hdf5_arrays(file, {"/" + split + "/x", "/" + split + "/y", "/x", "/y"},
                                   options.memory_limit_bytes, 0b1111);
  for (std::size_t first : {0, 2})
    if (h5.present[first])
      return {std::move(h5.arrays[first]), h5.present[first + 1]
                                               ? std::optional(std::move(h5.arrays[first + 1]))
                                               : std::nullopt};
  throw DataError(
      fmt::format("{}: no /{}/x or /x: eval needs the samples of the split", file.string(), split));
}

// <split>_x.npy [<split>_y.npy], else x.npy [y.npy], in a folder.
Found find_npy(const fs::path& dir, const std::string& split) {
  std::error_code ec;
  for (const std::string& prefix : {split + "_", std::string()}) {
    if (!fs::is_regular_file(dir / (prefix + "x.npy"), ec)) continue;
    Found found{read_npy(dir / (prefix + "x.npy")), std::nullopt};
    if (fs::is_regular_file(dir / (prefix + "y.npy"), ec))
      found.y = read_npy(dir / (prefix + "y.npy"));
    return found;
  }
  throw DataError(fmt::format("{}: no {}_x.npy or x.npy: eval needs the samples of the split",
                              dir.string(), split));
}

SplitData from_idx(const fs::path& dir, Split split, const LoadOptions& options) {
  SplitData out;
  out.data = load_fashion_mnist(dir, split, options.digest, options.memory_limit_bytes);
  out.info.path = dir.string();
  out.info.layout = DataLayout::kIdx;
  out.info.sample_shape = out.data.sample_shape;
  out.info.num_classes = out.data.num_classes;
  const std::string name = to_string(split);
  std::vector<std::uint64_t> shape = {out.data.size()};
  shape.insert(shape.end(), out.data.sample_shape.begin(), out.data.sample_shape.end());
  out.info.arrays = {{name + "/x", dir.string(), DType::kUint8, shape, false, out.data.x_xxh3,
                      conversion_of(DType::kUint8, ArrayRole::kSamples)},
                     {name + "/y",
                      dir.string(),
                      DType::kUint8,
                      {out.data.size()},
                      false,
                      out.data.y_xxh3,
                      conversion_of(DType::kUint8, ArrayRole::kLabels)}};
  return out;
}

}  // namespace

SplitData load_split(const fs::path& path, Split split, std::size_t classes,
                     const LoadOptions& options) {
  const fs::path where = path.empty() ? default_data_dir() : path;
  const std::string name = to_string(split);
  std::error_code ec;
  DataLayout layout = DataLayout::kNpy;
  Found found;
  if (fs::is_regular_file(where, ec) && where.extension() == ".npy") {
    found.x = read_npy(where);
  } else if (fs::is_regular_file(where, ec)) {
    layout = DataLayout::kHdf5;
    found = find_hdf5(where, name, options);
  } else if (fs::is_directory(where, ec) &&
             (fs::exists(where / (name + "_x.npy"), ec) || fs::exists(where / "x.npy", ec))) {
    found = find_npy(where, name);
  } else {
    return from_idx(where, split, options);
  }
  SplitData out;
  out.info.path = where.string();
  out.info.layout = layout;
  out.info.arrays.push_back(array_facts(name + "/x", found.x, true, options.map));
  if (found.y) out.info.arrays.push_back(array_facts(name + "/y", *found.y, false, options.map));
  check_memory_limit(out.info, options);
  if (!found.y) {
    out.data = make_unlabelled_dataset(found.x, options);
  } else {
    const bool targets = is_floating(found.y->dtype);
    const std::size_t n = targets ? 0 : classes > 0 ? classes : label_count(*found.y);
    out.data = make_dataset(found.x, *found.y, n, options);
  }
  out.info.sample_shape = out.data.sample_shape;
  out.info.num_classes = out.data.num_classes;
  out.info.num_targets = out.data.num_targets;
  return out;
}

}  // namespace ringtrain::data
