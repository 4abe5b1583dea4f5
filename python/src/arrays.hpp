// NumPy arrays at the border: what a binding accepts, and views that hand C++ memory to
// Python without a copy.
//
// A collective works in place on the caller's array, so it must be that very memory: a
// C-contiguous, writeable float32 array in native byte order. Anything else is refused
// with a TypeError that says what to pass; the binding never converts, because a converted
// copy would receive the result and the caller's array would silently keep its old values.
// Read-only inputs (a model's x) follow the same rule, so that no call copies behind the
// caller's back.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ringtrain::python {

namespace py = pybind11;

// The float32 elements of `x`, checked as above; `what` names the argument in messages
// ("ringtrain.allreduce: x"). writable = false accepts read-only arrays.
std::span<float> float32_span(const py::handle& x, const std::string& what, bool writable = true);
// The bytes of any C-contiguous array (point-to-point messages carry bytes).
std::span<std::byte> byte_span(const py::handle& x, const std::string& what, bool writable);

// A NumPy view of `data` with `shape` (C order) that keeps `owner` alive; no copy.
py::array_t<float> view(std::span<float> data, const std::vector<std::size_t>& shape,
                        const py::handle& owner, bool writable = true);
// A new NumPy array holding a copy of `data`.
py::array_t<float> copy(std::span<const float> data, const std::vector<std::size_t>& shape);

}  // namespace ringtrain::python
