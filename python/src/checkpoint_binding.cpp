// ringtrain.checkpoint: verify and load checkpoint files through the same seal check and
// contained reader as the ringtrain program (checkpoint/contained.hpp). libhdf5 parses the
// file in a child process, so a file crafted to crash libhdf5 kills the child, and the
// interpreter gets a CheckpointError naming the file instead of a segfault.
//
//   verify(path, key=None) -> {"header": ..., "entries": [...], "sealed", "mac_checked", ...}
//   load(path, key=None)   -> {"header": ..., "model": {name: array}, "optimizer": {...},
//                              "schedule", "data", "rng", "progress"}
// key: the path of a key file (as --checkpoint-key FILE); a file without a valid MAC for it
// is refused. load reads exactly the layout verify found (two reader children: the layout,
// then the values with every check of the program's own reads).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>

#include "arrays.hpp"
#include "bindings.hpp"
#include "ringtrain/checkpoint/contained.hpp"
#include "ringtrain/checkpoint/error.hpp"
#include "session.hpp"

namespace ringtrain::python {

namespace {

namespace ck = checkpoint;

std::optional<ck::MacKey> key_of(const py::object& key) {
  if (key.is_none()) return std::nullopt;
  return ck::MacKey::load(py::str(key).cast<std::string>());
}

py::dict header_dict(const ck::Header& h) {
  py::dict d;
  d["format"] = h.format;
  d["version"] = h.version;
  d["step"] = h.step;
  d["epoch"] = h.epoch;
  d["world_size"] = h.world_size;
  d["config"] = py::module_::import("json").attr("loads")(h.config_json);
  return d;
}

py::object value_object(const ck::Value& value) {
  if (const auto* a = std::get_if<ck::FloatArray>(&value)) return copy(a->values, a->shape);
  if (const auto* i = std::get_if<std::int64_t>(&value)) return py::int_(*i);
  if (const auto* u = std::get_if<std::uint64_t>(&value)) return py::int_(*u);
  if (const auto* f = std::get_if<double>(&value)) return py::float_(*f);
  return py::str(std::get<std::string>(value));
}

py::dict verify(const std::string& path, const py::object& key) {
  ensure_contained_reader();
  const auto k = key_of(key);
  const ck::VerifyResult r = ck::verify_file_contained(path, k ? &*k : nullptr);
  py::list entries;
  for (const ck::EntryInfo& e : r.entries)
    entries.append(py::dict(py::arg("group") = std::string(ck::group_name(e.group)),
                            py::arg("name") = e.name,
                            py::arg("kind") = std::string(ck::kind_name(e.kind)),
                            py::arg("shape") = py::tuple(py::cast(e.shape)),
                            py::arg("bytes") = e.bytes, py::arg("xxh3") = e.xxh3));
  py::dict d;
  d["header"] = header_dict(r.header);
  d["entries"] = entries;
  d["payload_bytes"] = r.payload_bytes;
  d["file_bytes"] = r.file_bytes;
  d["sealed"] = r.sealed;
  d["mac_present"] = r.mac_present;
  d["mac_checked"] = r.mac_checked;
  return d;
}

py::dict load(const std::string& path, const py::object& key) {
  ensure_contained_reader();
  const auto k = key_of(key);
  const ck::VerifyResult layout = ck::verify_file_contained(path, k ? &*k : nullptr);
  ck::Expected expected;
  for (const ck::EntryInfo& e : layout.entries) {
    if (e.kind == ck::Kind::kFloat32Array)
      expected.add_array(e.group, e.name, e.shape);
    else
      expected.add(e.group, e.name, e.kind);
  }
  ck::Header header;
  const ck::StateTree tree = ck::read_file_contained(path, expected, &header, k ? &*k : nullptr);
  py::dict d;
  d["header"] = header_dict(header);
  for (ck::Group g : ck::kAllGroups) d[py::str(std::string(ck::group_name(g)))] = py::dict();
  for (const ck::Entry& e : tree.entries())
    d[py::str(std::string(ck::group_name(e.group)))][py::str(e.name)] = value_object(e.value);
  return d;
}

}  // namespace

void bind_checkpoint(py::module_& m) {
  py::module_ c = m.def_submodule(
      "checkpoint",
      "Checkpoint files, read as the ringtrain program reads them: the seal is checked with "
      "plain reads, then libhdf5 parses the file in a child process (the contained reader), "
      "so a crafted file raises CheckpointError and never crashes the interpreter.");
  c.def("verify", &verify, py::arg("path"), py::arg("key") = py::none(),
        "Checks a checkpoint (seal, structure, every checksum; the MAC with key, a key file's "
        "path) and returns its header and entries. Raises CheckpointError naming the file and "
        "the reason.");
  c.def("load", &load, py::arg("path"), py::arg("key") = py::none(),
        "The checkpoint's contents after every check of verify: {'header': {...}, 'model': "
        "{name: float32 array}, 'optimizer': {...}, 'schedule', 'data', 'rng', 'progress'}. "
        "Raises CheckpointError.");
  c.def("_set_reader", &set_reader_executable, py::arg("path"),
        "Where the reader program lies (the package sets it on import).");
}

}  // namespace ringtrain::python
