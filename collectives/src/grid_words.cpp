// The grid sum's conversions in three copies that give the same bits (grid_words.hpp): the
// portable loops, AVX2 with FMA, AVX-512F. The vector copies keep an element's words in
// registers while every term of a group is added, so a word is loaded and stored once per
// group, not per term.
//
// Why the copies agree: a term's q(x) is the low bits of x·scale + kMagic (the magic constant
// rounds the exact product to an integer, to nearest, ties to even); the portable loop
// multiplies, then adds, the vector ones fuse the two, and both round once because the
// product is exact. The words' sums are integer additions (wrapping, the count's magic bits
// taken off once per element). Back, a word becomes an exact double (its bits put under the
// magic constant's), the power of two scales it exactly, and the one conversion to float32
// rounds to nearest even in every copy.
#include "grid_words.hpp"

#include <immintrin.h>

#include <bit>
#include <cmath>

#include "exact_words.hpp"

namespace ringtrain::collectives::grid_words {

namespace {

using exact_words::kMagic;
using exact_words::kMagicBits;

// The magic constant's bits once per term of a group: what a word's sum carries beyond Σ q.
std::uint64_t magic_of(std::size_t count) {
  return static_cast<std::uint64_t>(count) * static_cast<std::uint64_t>(kMagicBits);
}

bool add_terms_loop(const float* x, std::size_t stride, std::size_t count, std::size_t n,
                    double scale, float limit, bool first, std::int64_t* words) {
  const std::uint64_t magic = magic_of(count);
  bool inside = true;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t sum = first ? 0 : static_cast<std::uint64_t>(words[i]);
    for (std::size_t t = 0; t < count; ++t) {
      const float v = x[t * stride + i];
      inside &= std::fabs(v) < limit;
      sum += std::bit_cast<std::uint64_t>(static_cast<double>(v) * scale + kMagic);
    }
    words[i] = static_cast<std::int64_t>(sum - magic);
  }
  return inside;
}

// Eight elements at a time, their words in two registers of four.
[[gnu::target("avx2,fma")]] bool add_terms_avx2(const float* x, std::size_t stride,
                                                std::size_t count, std::size_t n, double scale,
                                                float limit, bool first, std::int64_t* words) {
  const __m256d scales = _mm256_set1_pd(scale), magics = _mm256_set1_pd(kMagic);
  const __m256i magic_sum = _mm256_set1_epi64x(static_cast<std::int64_t>(magic_of(count)));
  const __m256 limits = _mm256_set1_ps(limit);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 outside = _mm256_setzero_ps();  // lanes where |x| < limit failed (NaN included)
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    auto* w = reinterpret_cast<__m256i_u*>(words + i);
    __m256i low = first ? _mm256_setzero_si256() : _mm256_loadu_si256(w);
    __m256i high = first ? _mm256_setzero_si256() : _mm256_loadu_si256(w + 1);
    for (std::size_t t = 0; t < count; ++t) {
      const __m256 v = _mm256_loadu_ps(x + t * stride + i);
      outside =
          _mm256_or_ps(outside, _mm256_cmp_ps(_mm256_and_ps(v, abs_mask), limits, _CMP_NLT_UQ));
      const __m256d v_low = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
      const __m256d v_high = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
      low = _mm256_add_epi64(low, _mm256_castpd_si256(_mm256_fmadd_pd(v_low, scales, magics)));
      high = _mm256_add_epi64(high, _mm256_castpd_si256(_mm256_fmadd_pd(v_high, scales, magics)));
    }
    _mm256_storeu_si256(w, _mm256_sub_epi64(low, magic_sum));
    _mm256_storeu_si256(w + 1, _mm256_sub_epi64(high, magic_sum));
  }
  const bool tail_inside =
      add_terms_loop(x + i, stride, count, n - i, scale, limit, first, words + i);
  return tail_inside && _mm256_movemask_ps(outside) == 0;
}

// The maskz_ forms of the conversions and lane moves (all lanes on) stand in for the plain
// ones: g++ 12's plain forms read an undefined register and trip -Wmaybe-uninitialized.
constexpr __mmask8 kAll8 = 0xFF, kAll4 = 0xF;

// Sixteen elements at a time, their words in two registers of eight; the last, partial group
// of sixteen through masked loads and stores.
[[gnu::target("avx512f")]] bool add_terms_avx512(const float* x, std::size_t stride,
                                                 std::size_t count, std::size_t n, double scale,
                                                 float limit, bool first, std::int64_t* words) {
  const __m512d scales = _mm512_set1_pd(scale), magics = _mm512_set1_pd(kMagic);
  const __m512i magic_sum = _mm512_set1_epi64(static_cast<std::int64_t>(magic_of(count)));
  const __m512 limits = _mm512_set1_ps(limit);
  __mmask16 outside = 0;  // lanes where |x| < limit failed (NaN included)
  for (std::size_t i = 0; i < n; i += 16) {
    const __mmask16 lanes =
        n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);  // the elements left
    const auto low_lanes = static_cast<__mmask8>(lanes),
               high_lanes = static_cast<__mmask8>(lanes >> 8);
    __m512i low = first ? _mm512_setzero_si512() : _mm512_maskz_loadu_epi64(low_lanes, words + i);
    __m512i high =
        first ? _mm512_setzero_si512() : _mm512_maskz_loadu_epi64(high_lanes, words + i + 8);
    for (std::size_t t = 0; t < count; ++t) {
      const __m512 v = _mm512_maskz_loadu_ps(lanes, x + t * stride + i);
      outside |= _mm512_mask_cmp_ps_mask(lanes, _mm512_abs_ps(v), limits, _CMP_NLT_UQ);
      const __m512d v_low = _mm512_maskz_cvtps_pd(
          kAll8, _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(kAll4, _mm512_castps_pd(v), 0)));
      const __m512d v_high = _mm512_maskz_cvtps_pd(
          kAll8, _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(kAll4, _mm512_castps_pd(v), 1)));
      low = _mm512_add_epi64(low, _mm512_castpd_si512(_mm512_fmadd_pd(v_low, scales, magics)));
      high = _mm512_add_epi64(high, _mm512_castpd_si512(_mm512_fmadd_pd(v_high, scales, magics)));
    }
    _mm512_mask_storeu_epi64(words + i, low_lanes, _mm512_sub_epi64(low, magic_sum));
    _mm512_mask_storeu_epi64(words + i + 8, high_lanes, _mm512_sub_epi64(high, magic_sum));
  }
  return outside == 0;
}

// The word as an exact double: its bits under the magic constant's, minus the constant
// (exact_words::word_to_double).
[[gnu::always_inline]] inline void round_loop(const std::int64_t* words, std::size_t n, int grid,
                                              float* out) {
  const double scale = std::ldexp(1.0, grid);
  for (std::size_t i = 0; i < n; ++i)
    out[i] = static_cast<float>(exact_words::word_to_double(words[i]) * scale);
}

// The same loop, vectorised by the compiler for AVX2.
[[gnu::target("avx2")]] void round_avx2(const std::int64_t* words, std::size_t n, int grid,
                                        float* out) {
  round_loop(words, n, grid, out);
}

// Eight words to float32 (the lanes of `lanes`; the others read as 0).
[[gnu::target("avx512f")]] inline __m256 round_eight(__mmask8 lanes, const std::int64_t* from,
                                                     __m512d scale) {
  const __m512d magic = _mm512_set1_pd(kMagic);
  const __m512i word = _mm512_maskz_loadu_epi64(lanes, from);
  const __m512i bits = _mm512_add_epi64(word, _mm512_set1_epi64(kMagicBits));
  const __m512d exact = _mm512_sub_pd(_mm512_castsi512_pd(bits), magic);
  return _mm512_maskz_cvtpd_ps(kAll8, _mm512_mul_pd(exact, scale));
}

[[gnu::target("avx512f")]] void round_avx512(const std::int64_t* words, std::size_t n, int grid,
                                             float* out) {
  const __m512d scale = _mm512_set1_pd(std::ldexp(1.0, grid));
  for (std::size_t i = 0; i < n; i += 16) {
    const __mmask16 lanes = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    const __m256 low = round_eight(static_cast<__mmask8>(lanes), words + i, scale);
    const __m256 high = round_eight(static_cast<__mmask8>(lanes >> 8), words + i + 8, scale);
    const __m512d both = _mm512_maskz_insertf64x4(
        kAll8, _mm512_castpd256_pd512(_mm256_castps_pd(low)), _mm256_castps_pd(high), 1);
    _mm512_mask_storeu_ps(out + i, lanes, _mm512_castpd_ps(both));
  }
}

}  // namespace

bool runs(Isa isa) {
  __builtin_cpu_init();
  switch (isa) {
    case Isa::kBaseline:
      return true;
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Isa::kAvx512:
      return __builtin_cpu_supports("avx512f");
  }
  return false;
}

Isa widest() {
#ifdef RINGTRAIN_EXACT_BASELINE_ONLY
  return Isa::kBaseline;
#else
  static const Isa isa = runs(Isa::kAvx512) ? Isa::kAvx512
                         : runs(Isa::kAvx2) ? Isa::kAvx2
                                            : Isa::kBaseline;
  return isa;
#endif
}

const char* name(Isa isa) {
  switch (isa) {
    case Isa::kBaseline:
      return "baseline";
    case Isa::kAvx2:
      return "AVX2";
    case Isa::kAvx512:
      return "AVX-512";
  }
  return "?";
}

bool add_terms(Isa isa, const float* x, std::size_t stride, std::size_t count, std::size_t n,
               double scale, float limit, bool first, std::int64_t* words) {
  switch (isa) {
    case Isa::kAvx512:
      return add_terms_avx512(x, stride, count, n, scale, limit, first, words);
    case Isa::kAvx2:
      return add_terms_avx2(x, stride, count, n, scale, limit, first, words);
    case Isa::kBaseline:
      break;
  }
  return add_terms_loop(x, stride, count, n, scale, limit, first, words);
}

void round(Isa isa, const std::int64_t* words, std::size_t n, int grid, float* out) {
  switch (isa) {
    case Isa::kAvx512:
      return round_avx512(words, n, grid, out);
    case Isa::kAvx2:
      return round_avx2(words, n, grid, out);
    case Isa::kBaseline:
      break;
  }
  round_loop(words, n, grid, out);
}

}  // namespace ringtrain::collectives::grid_words
