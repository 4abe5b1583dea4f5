// The module's Python exceptions and the translation of the C++ errors into them:
//   ringtrain.Error                     (RuntimeError) ringtrain::Error, CollectiveError
//   ringtrain.UsageError                (ringtrain.Error, ValueError) ringtrain::UsageError
//   ringtrain.checkpoint.CheckpointError  (ringtrain.Error) checkpoint::CheckpointError
// The message is the C++ error's one line, unchanged.
#pragma once

#include <pybind11/pybind11.h>

namespace ringtrain::python {

namespace py = pybind11;

// Creates the classes on `m` (and its checkpoint submodule) and registers the translator.
void register_errors(py::module_& m);

}  // namespace ringtrain::python
