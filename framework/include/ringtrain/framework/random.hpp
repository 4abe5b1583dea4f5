// Counter-based randomness: every random number is a pure function of a key, so results do
// not depend on which rank, thread or order produced them.
//
//   permutation of epoch e       key (seed, kStreamSampler, e, i)
//   dropout mask of sample s     key (seed, kStreamDropout, layer, s, j)
//   initial weight j of param p  key (seed, kStreamInit, p, j)
//   validation hold-out draw i   key (seed, kStreamHoldOut, i)
//
// The mixer is SplitMix64's finaliser applied to a running combination of the key words:
// statistically good enough for sampling and initialisation, trivially reproducible.
#pragma once

#include <cstdint>
#include <initializer_list>

namespace ringtrain::random {

inline constexpr std::uint64_t kStreamSampler = 1;
inline constexpr std::uint64_t kStreamDropout = 2;
inline constexpr std::uint64_t kStreamInit = 3;
inline constexpr std::uint64_t kStreamHoldOut = 4;

constexpr std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A 64-bit hash of the key words; the same words always give the same bits.
constexpr std::uint64_t hash(std::initializer_list<std::uint64_t> key) {
  std::uint64_t h = 0x9e3779b97f4a7c15ULL;
  for (std::uint64_t word : key) h = mix64(h + 0x9e3779b97f4a7c15ULL + word);
  return h;
}

// Uniform in [0, 1) from the top 24 bits (exactly representable as float).
constexpr float uniform01(std::uint64_t bits) {
  return static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);
}

// Uniform integer in [0, n) for n < 2^32: the top 32 bits scaled by n (Lemire's
// multiply-shift; bias below n / 2^32).
constexpr std::uint64_t below(std::uint64_t bits, std::uint64_t n) {
  return ((bits >> 32) * n) >> 32;
}

}  // namespace ringtrain::random
