// Test inputs for the bf16 wire: floats with all 23 fraction bits random (a bf16 rounding
// always has work to do), either sign, magnitudes in [2^-4, 2^5), a pure function of a key.
#pragma once

#include <bit>
#include <cstdint>

namespace ringtrain::testing {

inline std::uint64_t mix(std::uint64_t z) {  // splitmix64's finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

inline float random_float(std::uint64_t key) {
  const std::uint64_t h = mix(key);
  const auto fraction = static_cast<std::uint32_t>(h & 0x7fffff);
  const auto exponent = static_cast<std::uint32_t>(127 - 4 + (h >> 23) % 9);
  const std::uint32_t sign = (h >> 40) & 1 ? 0x80000000u : 0;
  return std::bit_cast<float>(sign | exponent << 23 | fraction);
}

}  // namespace ringtrain::testing
