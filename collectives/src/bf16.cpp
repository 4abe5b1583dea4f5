// bf16 conversions in bulk (bf16.hpp): a portable scalar loop and an AVX-512 loop, chosen at
// run time. The AVX-512 functions carry a target attribute and have internal linkage, so no
// AVX-512 instruction reaches code that runs on other CPUs; they are called only after
// bf16_avx512_supported() said yes.
//
// The vector encode is the scalar to_bf16 on 16 lanes:
//   rounded = u + 0x7fff + ((u >> 16) & 1)         round to nearest even, carry into exponent
//   result  = |u| > 0x7f800000 ? u | 0x00400000 : rounded      NaN: quiet, payload kept
//   bf16    = result >> 16
// Tails shorter than 16 lanes use masked loads and stores, so every element goes through
// the same instructions.
#include "ringtrain/collectives/bf16.hpp"

#include <immintrin.h>

#include <cstddef>
#include <string>

#include "ringtrain/collectives/communicator.hpp"

namespace ringtrain::collectives {
namespace {

#define RT_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl")))

// The maskz_ forms of shifts and widening (all lanes on) stand in for the plain ones: g++ 12's
// plain forms read _mm512_undefined_epi32() and trip -Wmaybe-uninitialized.
constexpr __mmask16 kAll = 0xFFFF;

RT_AVX512_BF16 inline __mmask16 first_lanes(std::size_t count) {
  return count >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << count) - 1);
}

RT_AVX512_BF16 inline __m512i encode_lanes(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i odd = _mm512_and_si512(_mm512_maskz_srli_epi32(kAll, u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  const __m512i result = _mm512_mask_or_epi32(rounded, nan, u, _mm512_set1_epi32(0x00400000));
  return _mm512_maskz_srli_epi32(kAll, result, 16);  // 16 bf16 in the low halves of the lanes
}

RT_AVX512_BF16 inline __m512 decode_lanes(const Bf16* in, __mmask16 lanes) {
  const __m256i bits = _mm256_maskz_loadu_epi16(lanes, in);
  return _mm512_castsi512_ps(
      _mm512_maskz_slli_epi32(kAll, _mm512_maskz_cvtepu16_epi32(kAll, bits), 16));
}

RT_AVX512_BF16 void encode_avx512(const float* in, Bf16* out, std::size_t n) {
  for (std::size_t i = 0; i < n; i += 16) {
    const __mmask16 lanes = first_lanes(n - i);
    const __m512i bf = encode_lanes(_mm512_maskz_loadu_ps(lanes, in + i));
    _mm512_mask_cvtepi32_storeu_epi16(out + i, lanes, bf);
  }
}

RT_AVX512_BF16 void decode_avx512(const Bf16* in, float* out, std::size_t n) {
  for (std::size_t i = 0; i < n; i += 16) {
    const __mmask16 lanes = first_lanes(n - i);
    _mm512_mask_storeu_ps(out + i, lanes, decode_lanes(in + i, lanes));
  }
}

RT_AVX512_BF16 void add_avx512(const Bf16* in, float* inout, std::size_t n) {
  for (std::size_t i = 0; i < n; i += 16) {
    const __mmask16 lanes = first_lanes(n - i);
    const __m512 sum =
        _mm512_add_ps(_mm512_maskz_loadu_ps(lanes, inout + i), decode_lanes(in + i, lanes));
    _mm512_mask_storeu_ps(inout + i, lanes, sum);
  }
}

void check_lengths(std::size_t in, std::size_t out, const char* what) {
  if (in != out)
    throw CollectiveError(std::string(what) + ": input has " + std::to_string(in) +
                          " elements but output has " + std::to_string(out));
}

// kBest resolved for this CPU; kAvx512 refused where the CPU lacks it.
Bf16Kernels resolve(Bf16Kernels kernels) {
  if (kernels == Bf16Kernels::kBest)
    return bf16_avx512_supported() ? Bf16Kernels::kAvx512 : Bf16Kernels::kScalar;
  if (kernels == Bf16Kernels::kAvx512 && !bf16_avx512_supported())
    throw CollectiveError("bf16 AVX-512 kernels need AVX-512F/BW/VL; this CPU lacks them");
  return kernels;
}

}  // namespace

bool bf16_avx512_supported() {
  static const bool supported = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
  }();
  return supported;
}

void encode_bf16(std::span<const float> in, std::span<Bf16> out, Bf16Kernels kernels) {
  check_lengths(in.size(), out.size(), "encode_bf16");
  if (resolve(kernels) == Bf16Kernels::kAvx512)
    return encode_avx512(in.data(), out.data(), in.size());
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = to_bf16(in[i]);
}

void decode_bf16(std::span<const Bf16> in, std::span<float> out, Bf16Kernels kernels) {
  check_lengths(in.size(), out.size(), "decode_bf16");
  if (resolve(kernels) == Bf16Kernels::kAvx512)
    return decode_avx512(in.data(), out.data(), in.size());
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = from_bf16(in[i]);
}

void add_bf16(std::span<const Bf16> in, std::span<float> inout, Bf16Kernels kernels) {
  check_lengths(in.size(), inout.size(), "add_bf16");
  if (resolve(kernels) == Bf16Kernels::kAvx512)
    return add_avx512(in.data(), inout.data(), in.size());
  for (std::size_t i = 0; i < in.size(); ++i) inout[i] += from_bf16(in[i]);
}

}  // namespace ringtrain::collectives
