// Checks and views of NumPy arrays (arrays.hpp).
#include "arrays.hpp"

#include <algorithm>
#include <cstring>

namespace ringtrain::python {

namespace {

std::string describe(const py::array& a) {
  std::string shape = "(";
  for (py::ssize_t i = 0; i < a.ndim(); ++i) shape += (i ? ", " : "") + std::to_string(a.shape(i));
  shape += a.ndim() == 1 ? ",)" : ")";
  return py::str(a.dtype()).cast<std::string>() + " array of shape " + shape;
}

py::array as_array(const py::handle& x, const std::string& what) {
  if (!py::isinstance<py::array>(x))
    throw py::type_error(what + " must be a NumPy array, not " +
                         py::str(py::type::of(x).attr("__name__")).cast<std::string>());
  return py::reinterpret_borrow<py::array>(x);
}

}  // namespace

std::span<float> float32_span(const py::handle& x, const std::string& what, bool writable) {
  const py::array a = as_array(x, what);
  const bool float32 = py::isinstance<py::array_t<float>>(a);  // native float32
  const bool contiguous = (a.flags() & py::array::c_style) != 0;
  if (!float32 || !contiguous)
    throw py::type_error(
        what + " must be a C-contiguous float32 array, not a " +
        (contiguous ? "" : "non-contiguous ") + describe(a) +
        ": make one with np.ascontiguousarray(x, dtype=np.float32) and pass that array "
        "(no copy is made here: the result is written into the array you pass)");
  if (writable && !a.writeable())
    throw py::type_error(what + " is read-only: the result is written into it");
  auto* data = static_cast<float*>(const_cast<void*>(a.data()));
  return {data, static_cast<std::size_t>(a.size())};
}

std::span<std::byte> byte_span(const py::handle& x, const std::string& what, bool writable) {
  const py::array a = as_array(x, what);
  if ((a.flags() & py::array::c_style) == 0)
    throw py::type_error(what + " must be C-contiguous, not a non-contiguous " + describe(a) +
                         ": use np.ascontiguousarray(x)");
  if (writable && !a.writeable()) throw py::type_error(what + " is read-only: it receives data");
  if (a.dtype().kind() == 'O')
    throw py::type_error(what + " holds Python objects; send numeric arrays");
  auto* data = static_cast<std::byte*>(const_cast<void*>(a.data()));
  return {data, static_cast<std::size_t>(a.nbytes())};
}

py::array_t<float> view(std::span<float> data, const std::vector<std::size_t>& shape,
                        const py::handle& owner, bool writable) {
  py::array_t<float> a(shape, data.data(), owner);
  if (!writable)
    py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return a;
}

py::array_t<float> copy(std::span<const float> data, const std::vector<std::size_t>& shape) {
  py::array_t<float> a(shape);
  if (!data.empty()) std::memcpy(a.mutable_data(), data.data(), data.size_bytes());
  return a;
}

}  // namespace ringtrain::python
