// The parts of the extension module ringtrain._ringtrain, one function per file; module.cpp
// calls them in order. The Python package (python/ringtrain/) re-exports them.
#pragma once

#include <pybind11/pybind11.h>

namespace ringtrain::python {

namespace py = pybind11;

void bind_mpi(py::module_& m);          // ringtrain.mpi: world(), Comm, Request
void bind_collectives(py::module_& m);  // the ring, the exact sum, the pure functions
void bind_model(py::module_& m);        // Model
void bind_checkpoint(py::module_& m);   // checkpoint.verify / load
void bind_train(py::module_& m);        // train(): the `ringtrain train` command

}  // namespace ringtrain::python
