// The conversions of convert.hpp: a typed loop per dtype, the checks of floats inside it (a
// value is looked at once, while it is converted).
#include "ringtrain/framework/data/convert.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "ringtrain/framework/error.hpp"

namespace ringtrain::data {
namespace {

// The value of the item at `p`, of type T, little-endian as the readers guarantee.
template <typename T>
T load(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

[[noreturn]] void refuse_bool(const StoredArray& a, std::size_t i, std::uint8_t byte) {
  throw DataError(
      fmt::format("{}: byte {} at index {} of a bool array (a bool is 0 or 1)", a.where, byte, i));
}

// Where item i lies, for messages: "sample 3, element 7".
struct Position {
  const StoredArray& a;
  const char* name;     // "x" or "y"
  const char* element;  // "element" or "target"

  [[noreturn]] void refuse(std::size_t i, const std::string& value, const char* why) const {
    const std::uint64_t per_sample =
        a.shape.empty() || a.shape[0] == 0 ? 1 : a.items() / a.shape[0];
    throw DataError(fmt::format("{}: {} at sample {}, {} {}: {} {}", a.where, value, i / per_sample,
                                element, i % per_sample, name, why));
  }
};

// out[i] = item i as float; floats checked finite and (float64) within float32's range.
template <typename T>
void convert(std::span<const std::uint8_t> bytes, std::span<float> out, const Position& at) {
  for (std::size_t i = 0; i < out.size(); ++i) {
    const T v = load<T>(bytes.data() + i * sizeof(T));
    if constexpr (std::is_floating_point_v<T>) {
      if (!std::isfinite(v)) at.refuse(i, fmt::format("{}", v), "must be finite");
      out[i] = static_cast<float>(v);
      if (std::isinf(out[i]))
        at.refuse(i, fmt::format("{}", v),
                  "is beyond float32's range (magnitude at most 3.4028235e38): scale the data");
    } else {
      out[i] = static_cast<float>(v);
    }
  }
}

void convert_half(std::span<const std::uint8_t> bytes, std::span<float> out, const Position& at) {
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = half_to_float(load<std::uint16_t>(bytes.data() + 2 * i));
    if (!std::isfinite(out[i])) at.refuse(i, fmt::format("{}", out[i]), "must be finite");
  }
}

void convert_bool(const StoredArray& a, std::span<const std::uint8_t> bytes, std::span<float> out) {
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (bytes[i] > 1) refuse_bool(a, i, bytes[i]);
    out[i] = bytes[i];
  }
}

}  // namespace

float half_to_float(std::uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  float magnitude;
  if (exponent == 0)  // zero and subnormals: mantissa · 2^-24
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  else if (exponent == 31)
    magnitude = mantissa == 0 ? std::numeric_limits<float>::infinity()
                              : std::numeric_limits<float>::quiet_NaN();
  else  // 1.mantissa · 2^(exponent - 15)
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
  return (bits & 0x8000) != 0 ? -magnitude : magnitude;
}

bool samples_kept(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kUint8;
}

std::string conversion_of(DType dtype, ArrayRole role) {
  const std::string name = to_string(dtype);
  if (role == ArrayRole::kLabels) {
    if (dtype == DType::kInt32) return "";
    return name + " to int32 class labels" + (dtype == DType::kBool ? " (false 0, true 1)" : "");
  }
  switch (dtype) {
    case DType::kFloat32:
      return "";
    case DType::kUint8:
      return "uint8 / 255 to float32, as each batch is gathered";
    case DType::kFloat64:
      return "float64 rounded to float32 (to nearest)";
    case DType::kFloat16:
      return "float16 to float32 (exact)";
    case DType::kInt32:
    case DType::kUint32:
    case DType::kInt64:
    case DType::kUint64:
      return name + " values to float32 (to nearest beyond 2^24)";
    default:
      return name + " values to float32 (exact)";
  }
}

void to_float32(const StoredArray& a, std::span<float> out, const char* name, const char* element) {
  const std::span<const std::uint8_t> bytes = a.bytes();
  const Position at{a, name, element};
  switch (a.dtype) {
    case DType::kBool:
      return convert_bool(a, bytes, out);
    case DType::kInt8:
      return convert<std::int8_t>(bytes, out, at);
    case DType::kUint8:
      return convert<std::uint8_t>(bytes, out, at);
    case DType::kInt16:
      return convert<std::int16_t>(bytes, out, at);
    case DType::kUint16:
      return convert<std::uint16_t>(bytes, out, at);
    case DType::kInt32:
      return convert<std::int32_t>(bytes, out, at);
    case DType::kUint32:
      return convert<std::uint32_t>(bytes, out, at);
    case DType::kInt64:
      return convert<std::int64_t>(bytes, out, at);
    case DType::kUint64:
      return convert<std::uint64_t>(bytes, out, at);
    case DType::kFloat16:
      return convert_half(bytes, out, at);
    case DType::kFloat32:
      return convert<float>(bytes, out, at);
    case DType::kFloat64:
      return convert<double>(bytes, out, at);
  }
}

std::int64_t integer_at(const StoredArray& a, std::span<const std::uint8_t> bytes, std::size_t i) {
  const std::uint8_t* p = bytes.data() + i * item_bytes(a.dtype);
  switch (a.dtype) {
    case DType::kBool:
      if (*p > 1) refuse_bool(a, i, *p);
      return *p;
    case DType::kInt8:
      return load<std::int8_t>(p);
    case DType::kUint8:
      return *p;
    case DType::kInt16:
      return load<std::int16_t>(p);
    case DType::kUint16:
      return load<std::uint16_t>(p);
    case DType::kInt32:
      return load<std::int32_t>(p);
    case DType::kUint32:
      return load<std::uint32_t>(p);
    case DType::kInt64:
      return load<std::int64_t>(p);
    case DType::kUint64: {
      const auto v = load<std::uint64_t>(p);
      if (v > std::uint64_t(INT64_MAX))
        throw DataError(fmt::format("{}: label {} at index {} is out of range", a.where, v, i));
      return std::int64_t(v);
    }
    default:
      throw Error(fmt::format("{}: integer_at on {} items", a.where, to_string(a.dtype)));
  }
}

}  // namespace ringtrain::data
