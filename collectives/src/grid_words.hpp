// The grid sum's conversions (grid_sum.hpp): float32 terms rounded onto a block's grid and
// added into int64 words, and the words rounded back to float32. Private to the module.
//
// Three copies of each loop give the same bits: the portable loop (the build's baseline,
// SSE2), AVX2 with FMA (eight elements at a time) and AVX-512F (sixteen). Every operation in
// them is exact or correctly rounded (a term times a power of two, the magic constant's
// rounding to an integer, integer additions, one conversion back), so the width cannot change
// a bit. The widest copy the CPU runs is chosen at run time; the tests run every copy this
// CPU can run against the portable one (tests/collectives/grid_words_test.cpp).
//
// Vocabulary as in grid_sum.hpp: a term x becomes q(x) = round(x · scale), scale = 2^-g, to
// nearest, ties to even; the word of an element holds Σ q over its terms.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringtrain::collectives::grid_words {

enum class Isa { kBaseline, kAvx2, kAvx512 };

// The widest copy this CPU runs (kBaseline in a build with RINGTRAIN_EXACT_BASELINE_ONLY, the
// tests' baseline builds), and whether it runs `isa`.
Isa widest();
bool runs(Isa isa);
const char* name(Isa isa);

// words[i] (+)= Σ_t q(x_t[i]) for `count` terms whose pieces lie `stride` floats apart
// (x_t = x + t · stride), i < n; first: the words hold nothing yet (they are written, not
// added to). Returns false if some |x| is not below `limit` (a NaN included): the caller
// then looks closer. The product x·scale must be exact and below 2^51 for every term below
// the limit (grid_sum.hpp: |x| < 2^E, g = E − p).
bool add_terms(Isa isa, const float* x, std::size_t stride, std::size_t count, std::size_t n,
               double scale, float limit, bool first, std::int64_t* words);

// out[i] <- float32(words[i] · 2^grid), rounded once (|words[i]| <= 2^51, |grid| <= 190).
void round(Isa isa, const std::int64_t* words, std::size_t n, int grid, float* out);

}  // namespace ringtrain::collectives::grid_words
