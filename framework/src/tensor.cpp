// Small helpers for shapes.
#include "ringtrain/framework/tensor.hpp"

namespace ringtrain {

std::string to_string(const Shape& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + ")";
}

}  // namespace ringtrain
