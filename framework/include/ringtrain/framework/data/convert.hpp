// What training reads from each NumPy dtype a user's array may have (stored_array.hpp):
//
//   samples (x)   float32 as stored and uint8 pixel bytes / 255 (both stay mapped: each batch
//                 converts its own samples when gathered); every other dtype is converted
//                 into float32 in memory once, at load: float64 rounded to nearest (a finite
//                 value beyond float32's range is refused), float16 exactly, integers and bool
//                 as their values (rounded to nearest beyond 2^24)
//   labels (y)    any integer dtype or bool (0 or 1), as int32 class indices
//   targets (y)   float16, float32 or float64 (regression), as float32, converted as x
//
// Floats must be finite wherever they come from: one NaN would poison every parameter.
// Vocabulary: "kept" arrays need no conversion (they can stay mapped); the manifest records
// each conversion's text (conversion_of).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "ringtrain/framework/data/stored_array.hpp"

namespace ringtrain::data {

enum class ArrayRole { kSamples, kLabels, kTargets };

// Samples of this dtype are read where they lie (float32 as is, uint8 / 255 per batch).
bool samples_kept(DType dtype);

// What becomes of an array of `dtype` in `role`, as the manifest records it, e.g.
// "float64 rounded to float32 (to nearest)"; "" when it is used as stored.
std::string conversion_of(DType dtype, ArrayRole role);

// Every item of `a` (any dtype but uint8 samples, which are divided by 255 elsewhere) as
// float32 into `out` (a.items() floats). Throws DataError naming a.where and the position
// (sample, and `element` within it, e.g. "element" or "target") of the first value that is
// not finite ("<value> at sample 3, element 7: x must be finite", `name` being "x" or "y"), or
// finite but beyond float32's range, or a bool byte other than 0 and 1.
void to_float32(const StoredArray& a, std::span<float> out, const char* name, const char* element);

// Item i of an integer or bool array (labels) as a value. Throws DataError naming a.where for
// a bool byte other than 0 and 1 and for a uint64 beyond int64's range ("label ... at index
// 5 is out of range").
std::int64_t integer_at(const StoredArray& a, std::span<const std::uint8_t> bytes, std::size_t i);

// IEEE binary16 bits as float (exact: every float16 is a float32).
float half_to_float(std::uint16_t bits);

}  // namespace ringtrain::data
