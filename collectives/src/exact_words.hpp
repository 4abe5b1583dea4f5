// Integer words and their rounding, shared by the two exact sums (exact_sum.cpp: two bins per
// element; grid_sum.cpp: one word per element on an agreed grid). Private to the module.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <span>
#include <vector>

#include "ringtrain/collectives/schedule.hpp"

namespace ringtrain::collectives::exact_words {

// Round-to-nearest-even of a double d with |d| <= 2^51: d + 1.5·2^52 lands in [2^52, 2^53),
// where doubles are the integers, so the addition rounds d and the low bits hold it.
inline constexpr double kMagic = 0x1.8p52;
inline const std::int64_t kMagicBits = std::bit_cast<std::int64_t>(kMagic);

// float32 of a + b, rounded once. a and b are exact doubles (integers times powers of two);
// the double sum s is made round-to-odd (the neighbour with an odd last bit when s is
// inexact), and rounding a round-to-odd double (53 bits >= 2·24 + 2) to float32 gives the
// correctly rounded float32 of a + b, subnormal and overflowing results included.
[[gnu::always_inline]] inline float round_sum_to_float(double a, double b) {
  const double s = a + b;
  const double b_part = s - a;  // TwoSum: s + e == a + b exactly
  const double e = (a - (s - b_part)) + (b - b_part);
  const auto bits = std::bit_cast<std::int64_t>(s);
  const std::int64_t toward = ((e > 0) == (s > 0)) ? 1 : -1;  // one ulp toward a + b
  const std::int64_t step = (e != 0 && (bits & 1) == 0) ? toward : 0;
  return static_cast<float>(std::bit_cast<double>(bits + step));
}

// The double of an integer word, |word| <= 2^51: the magic constant's bits plus the word are
// the bits of 1.5·2^52 + word (a vectorisable int64 -> double without AVX-512).
[[gnu::always_inline]] inline double word_to_double(std::int64_t word) {
  return std::bit_cast<double>(kMagicBits + word) - kMagic;
}

// Whether the loops' AVX2 copies may run. RINGTRAIN_EXACT_BASELINE_ONLY: a test build that
// compiles the sums' sources itself and runs their baseline (SSE2) loops on an AVX2 machine
// too (tests/collectives, the *_baseline tests). Internal linkage: each file decides alone.
[[maybe_unused]] static bool has_avx2() {
#ifdef RINGTRAIN_EXACT_BASELINE_ONLY
  return false;
#else
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2;
#endif
}

// Where a term type keeps its exponent: the unsigned integer of its bits, the field's shift
// and mask (all ones: Inf or NaN), and the power e with |x| < 2^e for a field E >= 1,
// e = E − kBias (subnormals are taken as E = 1: an over-estimate, still a function of x).
template <typename T>
struct Layout;
template <>
struct Layout<float> {
  using Bits = std::uint32_t;
  static constexpr int kShift = 23, kMask = 0xff, kBias = 126;
};
template <>
struct Layout<double> {
  using Bits = std::uint64_t;
  static constexpr int kShift = 52, kMask = 0x7ff, kBias = 1022;
};

template <typename T>
int exponent_field(T x) {
  using L = Layout<T>;
  return static_cast<int>((std::bit_cast<typename L::Bits>(x) >> L::kShift) & L::kMask);
}

// The largest exponent field among the finite terms, and whether any term is non-finite.
struct ExponentScan {
  int max_exponent = 0;
  bool non_finite = false;
};

// kCopy: the terms are also copied to `to` in the same pass (GridSum keeping a term).
template <typename T, bool kCopy = false>
[[gnu::always_inline]] inline ExponentScan scan_loop(std::span<const T> terms, T* to = nullptr) {
  int max_exponent = 0, special = 0;  // signed ints: SSE2 vectorises their max, not unsigned
  for (std::size_t i = 0; i < terms.size(); ++i) {
    if constexpr (kCopy) to[i] = terms[i];
    const int e = exponent_field(terms[i]);
    special |= e == Layout<T>::kMask;
    max_exponent = std::max(max_exponent, e == Layout<T>::kMask ? 0 : e);
  }
  return {max_exponent, special != 0};
}

// Every rank's number of elements in its chunk, and where the chunks begin (schedule.hpp).
inline void chunk_table(std::size_t M, int N, std::vector<int>& counts, std::vector<int>& begins) {
  for (int r = 0; r < N; ++r) {
    counts.push_back(static_cast<int>(chunk_size(M, static_cast<std::size_t>(N), r)));
    begins.push_back(static_cast<int>(chunk_begin(M, static_cast<std::size_t>(N), r)));
  }
}

}  // namespace ringtrain::collectives::exact_words
