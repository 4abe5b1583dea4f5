// bf16: the 16-bit float the ring can put on the wire (RingOptions::wire, options.hpp).
//
// Where it sits: with Wire::kBf16 every segment a rank sends is encoded to bf16 first and
// every segment it receives is decoded (and, in reduce-scatter, added) in fp32. Halving the
// bytes halves the bandwidth term of the ring's cost on a slow link.
//
// Vocabulary
//   bf16     the upper 16 bits of an IEEE float32: sign, the same 8 exponent bits, 7 fraction
//            bits (8 significant bits with the implicit one). Same range as float32, so
//            decoding is exact and only encoding rounds.
//   encode   float32 -> bf16, round to nearest, ties to even. Relative error at most
//            u = 2^-8 for a result in the normal range; below 2^-126 (the subnormal range)
//            the error is absolute, at most 2^-134. A float32 at or above the midpoint
//            between the largest finite bf16 (0x7f7f, about 3.39e38) and 2^128 rounds to
//            ±inf, as IEEE rounding says. ±inf stays ±inf; a NaN stays a NaN, made quiet
//            (fraction bit 6 set), sign and upper payload kept.
//   decode   bf16 -> float32: shift left by 16. Exact.
//
// Kernels: an AVX-512F path (integer arithmetic on 16 lanes) where the CPU has AVX-512F,
// chosen at run time, and a portable scalar path; both give the same bits for every input
// (tests/collectives/bf16_test.cpp). The AVX512_BF16 instruction vcvtneps2bf16 is not used:
// it treats subnormal inputs as zero (0x007fffff encodes to 0x0000, not 0x0080), so its bits
// would depend on the CPU.
//
// All calls take spans of equal length (checked: CollectiveError otherwise) and allocate
// nothing.
#pragma once

#include <bit>
#include <cstdint>
#include <span>

namespace ringtrain::collectives {

using Bf16 = std::uint16_t;  // the bits of one bf16 value

// float32 -> bf16, round to nearest even; NaN stays NaN (quiet). The reference every kernel
// matches bit for bit.
constexpr Bf16 to_bf16(float x) {
  const auto u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<Bf16>((u >> 16) | 0x0040u);
  // Adding 0x7fff rounds up exactly when the dropped half is above the midpoint; the kept
  // lowest bit adds the last 1 at the midpoint itself when it is odd (ties to even). A carry
  // out of the fraction increments the exponent, which is the right result (up to ±inf).
  return static_cast<Bf16>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// bf16 -> float32, exact.
constexpr float from_bf16(Bf16 b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

// float32 -> nearest bf16 value, as a float32: from_bf16(to_bf16(x)).
constexpr float round_to_bf16(float x) {
  return from_bf16(to_bf16(x));
}

// Which code runs the bulk conversions. kBest: AVX-512F if this CPU has it, else kScalar.
// Asking for kAvx512 on a CPU without AVX-512F throws CollectiveError.
enum class Bf16Kernels { kBest, kScalar, kAvx512 };
bool bf16_avx512_supported();

// out[i] = to_bf16(in[i]).
void encode_bf16(std::span<const float> in, std::span<Bf16> out,
                 Bf16Kernels kernels = Bf16Kernels::kBest);
// out[i] = from_bf16(in[i]).
void decode_bf16(std::span<const Bf16> in, std::span<float> out,
                 Bf16Kernels kernels = Bf16Kernels::kBest);
// inout[i] += from_bf16(in[i]), one float32 addition per element (when both are NaN, which
// payload comes out depends on the operand order: the kernels may differ there).
void add_bf16(std::span<const Bf16> in, std::span<float> inout,
              Bf16Kernels kernels = Bf16Kernels::kBest);

}  // namespace ringtrain::collectives
