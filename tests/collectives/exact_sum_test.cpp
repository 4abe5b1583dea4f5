// Exact sums at N = 1..4: random float streams (wide exponent range, mixed signs, cancelling
// pairs) give the same bits in any order, any grouping into partial accumulators and any split
// over ranks; the error against an exact integer reference stays within the header's bound;
// too many terms and mismatched sizes raise ExactSumError on every rank; NaN and Inf follow
// IEEE addition.
//
// Every rank builds the same global terms from a fixed seed and sums them alone in one order
// (the reference); the distributed sums must equal it bit for bit. The reference does not
// depend on N, so the runs at N = 1, 2, 3, 4 all compare against the same bits.
#include "ringtrain/collectives/exact_sum.hpp"

#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "mpi_test.hpp"

using namespace ringtrain::collectives;
using ringtrain::testing::Facts;

namespace {

__extension__ typedef __int128 Int128;  // the exact reference (a GCC extension)

using Terms = std::vector<std::vector<float>>;  // (T, M): term t of every element

// T terms of M elements: magnitudes 2^[lo_exp, hi_exp), random signs, and every fourth term
// the negation of the one before it plus a small part (cancellation down to the small part).
Terms make_terms(std::size_t T, std::size_t M, int lo_exp, int hi_exp, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> exponent(lo_exp, hi_exp - 1);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  Terms terms(T, std::vector<float>(M));
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t i = 0; i < M; ++i) {
      float x = std::ldexp(mantissa(rng), exponent(rng)) * (rng() % 2 ? 1.0f : -1.0f);
      if (t % 4 == 3) x = -terms[t - 1][i] + std::ldexp(mantissa(rng), lo_exp);
      if (rng() % 17 == 0) x = 0.0f;
      terms[t][i] = x;
    }
  return terms;
}

// The same terms with each run of 4 (a cancelling pair included) scaled by its own 2^s,
// s in [lo_exp, hi_exp): partial sums of a few terms then have windows one or several bins
// apart, so raising a window and merging across windows are exercised.
Terms scale_per_term(Terms terms, int lo_exp, int hi_exp, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> exponent(lo_exp, hi_exp - 1);
  for (std::size_t t = 0; t < terms.size(); t += 4) {
    const int s = exponent(rng);
    for (std::size_t k = t; k < std::min(t + 4, terms.size()); ++k)
      for (float& x : terms[k]) x = std::ldexp(x, s);
  }
  return terms;
}

// The terms summed in `order` into one accumulator with blocks of `blocks` elements.
ExactSum exact_words(const Terms& terms, std::span<const std::size_t> order,
                     std::span<const std::size_t> blocks) {
  ExactSum sum(blocks);
  for (std::size_t t : order) sum.add(terms[t]);
  return sum;
}

ExactSum exact_words(const Terms& terms, std::span<const std::size_t> order, std::size_t M) {
  ExactSum sum(M);
  for (std::size_t t : order) sum.add(terms[t]);
  return sum;
}

std::vector<float> exact_sum(const Terms& terms, std::span<const std::size_t> order,
                             std::size_t M) {
  std::vector<float> out(M);
  exact_words(terms, order, M).to_float(out);
  return out;
}

// The whole state, not only its float32 rounding (which hides terms far below the largest).
bool same_words(ExactSum& a, ExactSum& b) {
  return a.top() == b.top() && std::ranges::equal(a.words(), b.words()) &&
         std::ranges::equal(a.flags(), b.flags());
}

std::vector<std::size_t> iota(std::size_t n) {
  std::vector<std::size_t> v(n);
  std::iota(v.begin(), v.end(), std::size_t{0});
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  // An empty vector's data() may be null, which memcmp must not be given.
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// The terms `mine` summed in a random order and a random grouping: up to 5 partial sums, each
// taking a random subset, merged into one another in random order.
ExactSum grouped_sum(const Terms& terms, std::vector<std::size_t> mine,
                     std::span<const std::size_t> blocks, std::mt19937& rng) {
  std::shuffle(mine.begin(), mine.end(), rng);
  std::vector<ExactSum> parts(1 + rng() % 5, ExactSum(blocks));
  for (std::size_t t : mine) parts[rng() % parts.size()].add(terms[t]);
  while (parts.size() > 1) {
    const std::size_t a = rng() % parts.size();
    std::size_t b = rng() % (parts.size() - 1);
    if (b >= a) ++b;
    parts[b].merge(parts[a]);
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(a));
  }
  return parts[0];
}

template <typename Error, typename F>
bool throws_as(F f) {
  try {
    f();
  } catch (const Error&) {
    return true;
  } catch (...) {
    return false;
  }
  return false;
}

// Which rank owns each of T terms, for split `kind`: 0 near-equal contiguous, 1 uneven
// contiguous (rank r takes a share growing with r), 2 round-robin, 3 everything on the last
// rank (the others sum nothing), 4 random.
std::vector<int> owners(std::size_t T, int N, int kind, std::mt19937& rng) {
  std::vector<int> owner(T);
  const auto n = static_cast<std::size_t>(N);
  const std::size_t weight_total = n * (n + 1) / 2;
  for (std::size_t t = 0; t < T; ++t) {
    switch (kind) {
      case 0:
        owner[t] = static_cast<int>(t * n / T);
        break;
      case 1: {
        std::size_t r = 0, edge = T * 1 / weight_total;
        while (t >= edge && r + 1 < n) edge += T * (++r + 1) / weight_total;
        owner[t] = static_cast<int>(r);
        break;
      }
      case 2:
        owner[t] = static_cast<int>(t % n);
        break;
      case 3:
        owner[t] = N - 1;
        break;
      default:
        owner[t] = static_cast<int>(rng() % n);
    }
  }
  return owner;
}

}  // namespace

TEST_CASE("exact sum: the header's worked example") {
  Facts facts;
  ExactSum sum(1);
  const float tiny = std::ldexp(1.0f, -24);
  for (float x : {tiny, 1.0f, tiny}) sum.add(std::span(&x, 1));
  float out = 0;
  sum.to_float(std::span(&out, 1));
  facts.check(out == 1.0f + std::ldexp(1.0f, -23), "1 + 2^-24 + 2^-24 gave " + std::to_string(out));
  facts.check(sum.top() == 4 && sum.words()[0] == 1 && sum.words()[1] == (1 << 17),
              "words of 1 + 2^-24 + 2^-24 are not (1, 2^17) at top 4");
  ExactSum one_and_half(1);
  const float x = 1.5f;
  one_and_half.add(std::span(&x, 1));
  facts.check(one_and_half.words()[0] == 2 && one_and_half.words()[1] == -(std::int64_t{1} << 39),
              "1.5 is not (2, -2^39)");
  REQUIRE_ALL_RANKS(facts);
}

namespace {

// round(a / 2^s), ties to even, in exact integers (s may be negative: a · 2^-s).
Int128 round_shift(Int128 a, int s) {
  if (s <= 0) return a * (Int128{1} << -s);
  if (s >= 100) return 0;  // |a| < 2^25 here: far below half of 2^s
  const Int128 magnitude = a < 0 ? -a : a;
  Int128 q = magnitude >> s;
  const Int128 r = magnitude - (q << s), half = Int128{1} << (s - 1);
  if (r > half || (r == half && (q & 1) != 0)) ++q;
  return a < 0 ? -q : q;
}

}  // namespace

TEST_CASE("exact sum: the words are the header's slices, computed in exact integers") {
  // x = m · 2^q (m a 24-bit integer); the block's grid g = lsb(top−1) = 40·(top−1) − 160;
  // bin top holds round_top(x) = round(x / 2^(g+40)), bin top−1 round_(top−1)(x) − 2^40 ·
  // round_top(x), summed over the terms. Checked for float and double terms alike.
  Facts facts;
  const std::size_t T = 24, M = 9;
  const Terms terms = scale_per_term(make_terms(T, M, -30, 30, 61), -90, 90, 62);
  for (bool as_double : {false, true}) {
    ExactSum sum(M);
    for (const auto& term : terms) {
      if (as_double)
        sum.add(std::vector<double>(term.begin(), term.end()));
      else
        sum.add(term);
      const int g = ExactSum::kBinOffset + ExactSum::kBinBits * (sum.top() - 1);
      bool fits = true;  // the window's promise: every term so far rounds to zero above it
      for (float x : term) fits &= std::fabs(x) <= std::ldexp(1.0, g + 2 * ExactSum::kBinBits - 1);
      facts.check(fits, "a term lies above its window");
    }
    const int g = ExactSum::kBinOffset + ExactSum::kBinBits * (sum.top() - 1);
    for (std::size_t i = 0; i < M; ++i) {
      Int128 hi = 0, lo = 0;
      for (const auto& term : terms) {
        int q = 0;
        const auto m = static_cast<Int128>(std::ldexp(std::frexp(term[i], &q), 24));
        const Int128 top = round_shift(m, g + ExactSum::kBinBits - (q - 24));
        hi += top;
        lo += round_shift(m, g - (q - 24)) - top * (Int128{1} << ExactSum::kBinBits);
      }
      facts.check(sum.words()[i] == hi && sum.words()[M + i] == lo,
                  std::string(as_double ? "double" : "float") + " words of element " +
                      std::to_string(i) + " are not the slices");
    }
  }
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("exact sum: the words are rounded to float32 once, not through a double") {
  // 2^38 + 2^14 + 2^-40 lies just above the float32 tie between 2^38 and 2^38 + 2^15; rounded
  // first to a double (2^38 + 2^14, the tie) and then to float32 it would give 2^38.
  Facts facts;
  for (float sign : {1.0f, -1.0f}) {
    ExactSum sum(1);
    for (int e : {-40, 38, 14}) {
      const float x = sign * std::ldexp(1.0f, e);
      sum.add(std::span(&x, 1));
    }
    float out = 0;
    sum.to_float(std::span(&out, 1));
    facts.check(out == sign * (std::ldexp(1.0f, 38) + std::ldexp(1.0f, 15)),
                "2^38 + 2^14 + 2^-40 was rounded twice");
  }
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("exact sum: to_double rounds the words once to a double, non-finite as to_float") {
  // 1 + 2^-30 + 2^-30 = 1 + 2^-29 is a double but not a float32: to_double keeps it. Then
  // 2^60 + 2^7 + 2^1 (grid 2^0): the words hold it exactly, the nearest double is 2^60 + 2^8
  // (2^60 + 2^7 alone is a tie, which would round to even, 2^60): the tail counts.
  Facts facts;
  ExactSum small(1), tail(1), flagged(2);
  for (int e : {-30, 0, -30}) {
    const double x = std::ldexp(1.0, e);
    small.add(std::span(&x, 1));
  }
  for (int e : {7, 1, 60}) {
    const double x = std::ldexp(1.0, e);
    tail.add(std::span(&x, 1));
  }
  const std::vector<double> poison{std::numeric_limits<double>::quiet_NaN(), 2.5};
  flagged.add(poison);
  double out = 0;
  small.to_double(std::span(&out, 1));
  facts.check(out == 1.0 + std::ldexp(1.0, -29), "1 + 2^-30 + 2^-30 lost its tail");
  tail.to_double(std::span(&out, 1));
  facts.check(out == std::ldexp(1.0, 60) + std::ldexp(1.0, 8), "2^60 + 2^7 + 2 misrounded");
  std::vector<double> two(2);
  flagged.to_double(two);
  facts.check(std::isnan(two[0]) && two[1] == 2.5, "NaN element or its neighbour wrong");
  facts.check(throws_as<ExactSumError>([&] { flagged.to_double(std::span(&out, 1)); }),
              "a wrong output length was accepted");
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("exact sum: any order and grouping gives the same bits; float sums do not") {
  Facts facts;
  const std::size_t T = 64;
  const std::vector<Terms> streams{make_terms(T, 257, -100, 100, 7),
                                   scale_per_term(make_terms(T, 5, -8, 8, 8), -110, 110, 9)};
  std::mt19937 rng(11);
  for (std::size_t k = 0; k < streams.size(); ++k) {
    const Terms& terms = streams[k];
    const std::size_t M = terms[0].size();
    const std::vector<float> reference = exact_sum(terms, iota(T), M);
    ExactSum reference_words = exact_words(terms, iota(T), M);
    bool float_orders_differ = false;
    for (int trial = 0; trial < 30; ++trial) {
      ExactSum sum = grouped_sum(terms, iota(T), std::span(&M, 1), rng);
      std::vector<float> out(M);
      sum.to_float(out);
      facts.check(same_bits(out, reference) && same_words(sum, reference_words),
                  "stream " + std::to_string(k) + ", trial " + std::to_string(trial) + " differs");
      std::vector<std::size_t> order = iota(T);
      std::shuffle(order.begin(), order.end(), rng);
      float forward = 0, shuffled = 0;
      for (std::size_t t = 0; t < T; ++t) forward += terms[t][0];
      for (std::size_t t : order) shuffled += terms[t][0];
      float_orders_differ |= forward != shuffled;
    }
    facts.check(float_orders_differ,
                "stream " + std::to_string(k) + " is too easy: float sums agree in every order");
  }
  REQUIRE_ALL_RANKS(facts);
}

// clear() must leave nothing behind: the first term of a step raises the windows without
// moving words (they are known to be zero), so a cleared accumulator whose windows and words
// were high must, refilled, hold the words of a new one, including after words() handed its
// words out (the allreduce writes them) and after add_block.
TEST_CASE("exact sum: a cleared accumulator refilled holds a new one's words") {
  Facts facts;
  const std::size_t T = 12;
  const Terms big = make_terms(T, 33, 60, 100, 21);  // high windows, large words
  const Terms small = scale_per_term(make_terms(T, 33, -8, 8, 22), -110, 110, 23);
  const std::vector<std::size_t> blocks{20, 13};
  ExactSum fresh = exact_words(small, iota(T), blocks);
  for (int reuse = 0; reuse < 3; ++reuse) {
    ExactSum sum = exact_words(big, iota(T), blocks);
    if (reuse == 1) sum.words()[0] += 1;  // a writer through words(), as the allreduce
    if (reuse == 2) sum.add_block(1, std::span(big[0]).subspan(20));
    sum.clear();
    for (std::size_t t = 0; t < T; ++t) sum.add(small[t]);
    std::vector<float> a(33), b(33);
    sum.to_float(a);
    fresh.to_float(b);
    facts.check(sum.top(0) == fresh.top(0) && sum.top(1) == fresh.top(1) &&
                    std::ranges::equal(sum.words(), fresh.words()) && same_bits(a, b),
                "reuse " + std::to_string(reuse) + ": the refilled sum differs from a new one");
  }
  ExactSum written(4);  // words written through words() move when the window rises
  written.words()[1] = 5;
  written.raise_top(0, ExactSum::kMinTop + 1);
  facts.check(written.words()[4 + 1] == 5 && written.words()[1] == 0,
              "a word written through words() was not moved down by raise_top");
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("exact sum: error against an exact reference within the header's bound") {
  Facts facts;
  const std::size_t T = 48, M = 301;
  // |x| in [2^-40, 2^40): every term is an integer multiple of 2^-63, so Σ·2^64 is exact in
  // 128-bit integers (< 2^111).
  const Terms terms = make_terms(T, M, -40, 39, 23);
  const std::vector<float> result = exact_sum(terms, iota(T), M);
  const long double u = std::ldexp(1.0L, -24);
  long double X = 0;  // the block's largest term sets its grid
  for (const auto& term : terms)
    for (float x : term) X = std::max(X, std::fabs(static_cast<long double>(x)));
  for (std::size_t i = 0; i < M; ++i) {
    Int128 exact = 0;
    for (std::size_t t = 0; t < T; ++t)
      exact += static_cast<Int128>(std::ldexp(static_cast<long double>(terms[t][i]), 64));
    const long double S = std::ldexp(static_cast<long double>(exact), -64);
    const long double bound = u * std::fabs(S) + (1 + u) * T * X * std::ldexp(1.0L, -40) +
                              std::ldexp(std::fabs(S), -60);  // the reference's own rounding
    const long double error = std::fabs(static_cast<long double>(result[i]) - S);
    facts.check(error <= bound, "element " + std::to_string(i) + ": error " +
                                    std::to_string(static_cast<double>(error)) + " > bound " +
                                    std::to_string(static_cast<double>(bound)));
  }
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("exact sum: subnormal terms sum exactly, large ones overflow to Inf") {
  Facts facts;
  const float sub = std::numeric_limits<float>::denorm_min();
  const float big = std::numeric_limits<float>::max();
  // Two blocks of one accumulator: a block's grid follows its largest term, so FLT_MAX in the
  // same block as the subnormals would round them away (the header's bound); in its own
  // block it does not.
  const std::vector<std::size_t> blocks{2, 1};
  ExactSum sum(blocks);
  for (int k = 0; k < 5; ++k) sum.add(std::vector<float>{sub, -3 * sub, big});
  std::vector<float> out(3);
  sum.to_float(out);
  facts.check(sum.top(0) == ExactSum::kMinTop && sum.top(1) == ExactSum::kMaxTop,
              "the blocks' windows are not their own");
  facts.check(out[0] == 5 * sub && out[1] == -15 * sub, "subnormal sums are not exact");
  facts.check(std::isinf(out[2]) && out[2] > 0, "5 · FLT_MAX is not +Inf");
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("exact sum: non-finite terms give NaN or Inf as IEEE addition does") {
  Facts facts;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  // Elements: NaN, +Inf and -Inf, +Inf only, -Inf only, finite.
  const std::vector<float> a{nan, inf, inf, 1.0f, 2.5f}, b{1.0f, -inf, 2.0f, -inf, -0.5f};
  for (bool merged : {false, true}) {
    ExactSum sum(5), other(5);
    sum.add(a);
    (merged ? other : sum).add(b);
    if (merged) sum.merge(other);
    std::vector<float> out(5);
    sum.to_float(out);
    facts.check(std::isnan(out[0]) && std::isnan(out[1]), "NaN or +Inf-Inf did not give NaN");
    facts.check(out[2] == inf && out[3] == -inf, "a lone Inf did not propagate");
    facts.check(out[4] == 2.0f, "a finite element next to non-finite ones changed");
  }
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("exact sum: too many terms raise ExactSumError, nothing is changed") {
  Facts facts;
  ExactSum sum(2), half(2);
  const float row[2] = {1.0f, -2.0f};
  for (std::int64_t k = 0; k < ExactSum::kMaxTerms; ++k) sum.add(row);
  for (std::int64_t k = 0; k < ExactSum::kMaxTerms / 2 + 1; ++k) half.add(row);
  bool threw = false;
  try {
    sum.add(row);
  } catch (const ExactSumError& e) {
    threw = std::string(e.what()).find("exceed") != std::string::npos;
  }
  facts.check(threw, "term kMaxTerms + 1 was accepted");
  std::vector<float> out(2);
  sum.to_float(out);
  facts.check(out[0] == ExactSum::kMaxTerms && out[1] == -2.0f * ExactSum::kMaxTerms,
              "the refused add changed the sum");
  ExactSum other = half;
  facts.check(throws_as<ExactSumError>([&] { half.merge(other); }), "merge beyond kMaxTerms");
  facts.check(throws_as<ExactSumError>([&] { sum.raise_top(0, sum.top() - 1); }), "lowered window");
  facts.check(throws_as<ExactSumError>([&] { sum.raise_top(0, ExactSum::kMaxTop + 1); }),
              "window beyond kMaxTop");
  facts.check(throws_as<ExactSumError>([&] { sum.add(std::vector<float>(3)); }), "wrong size");
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("allreduce_exact: any split over ranks gives the single-process bits") {
  Facts facts;
  Communicator comm;
  const int N = comm.size(), me = comm.rank();
  const std::size_t T = 37;
  const std::vector<std::size_t> sizes{101, 1, 0, 6};
  // Block 0 spans 2^-120..2^90, block 1 small terms only, block 3 runs of terms scaled by
  // 2^-110..2^110 and sorted by scale, so that a contiguous split leaves the small ones (a
  // low window) on the first ranks and windows are raised through the agreement.
  std::vector<Terms> blocks_terms{make_terms(T, sizes[0], -120, 90, 3),
                                  make_terms(T, sizes[1], -30, -20, 5), Terms(T),
                                  scale_per_term(make_terms(T, sizes[3], -8, 8, 9), -110, 110, 4)};
  std::sort(blocks_terms[3].begin(), blocks_terms[3].end(),
            [](const auto& a, const auto& b) { return std::fabs(a[0]) < std::fabs(b[0]); });
  // One accumulator, one block per stream: term t is the concatenation of the streams' t.
  Terms terms(T);
  for (std::size_t t = 0; t < T; ++t)
    for (const Terms& block : blocks_terms)
      terms[t].insert(terms[t].end(), block[t].begin(), block[t].end());
  const std::size_t M = terms[0].size();
  ExactSum reference_words = exact_words(terms, iota(T), sizes);
  std::vector<float> reference(M);
  reference_words.to_float(reference);
  std::mt19937 rng(static_cast<std::uint32_t>(1000 + me));  // groupings differ per rank
  std::mt19937 split_rng(99);                               // splits agree across ranks
  for (int kind = 0; kind < 6; ++kind) {
    const std::vector<int> owner = owners(T, N, kind, split_rng);
    std::vector<std::size_t> mine;
    for (std::size_t t = 0; t < T; ++t)
      if (owner[t] == me) mine.push_back(t);
    ExactSum sum = grouped_sum(terms, mine, sizes, rng);
    ExactSum consumed = sum;
    allreduce_exact(comm, sum);
    std::vector<float> out(M), scattered(M);
    sum.to_float(out);
    facts.check(same_bits(out, reference) && same_words(sum, reference_words),
                "split " + std::to_string(kind) + " differs");
    allreduce_exact(comm, consumed, scattered);  // reduce-scatter words, all-gather floats
    facts.check(same_bits(scattered, reference),
                "split " + std::to_string(kind) + " differs through the reduce-scatter");
  }
  REQUIRE_ALL_RANKS(facts);
}

namespace {

// The term's part in block b of `sizes`.
std::span<const float> block_part(const std::vector<float>& term,
                                  const std::vector<std::size_t>& sizes, std::size_t b) {
  std::size_t begin = 0;
  for (std::size_t k = 0; k < b; ++k) begin += sizes[k];
  return std::span(term).subspan(begin, sizes[b]);
}

// The float32 of every element.
std::vector<float> floats_of(const ExactSum& sum) {
  std::vector<float> out(sum.size());
  sum.to_float(out);
  return out;
}

// Same windows in every block and the same bins (the term counter aside).
bool same_bins(ExactSum& a, ExactSum& b) {
  bool same = a.blocks() == b.blocks() && a.size() == b.size();
  for (std::size_t k = 0; same && k < a.blocks(); ++k) same = a.top(k) == b.top(k);
  return same && std::ranges::equal(a.words().first(2 * a.size()), b.words().first(2 * b.size()));
}

}  // namespace

TEST_CASE("exact sum: add_block gives add's words, in any order of blocks, terms and ranks") {
  Facts facts;
  Communicator comm;
  const int N = comm.size(), me = comm.rank();
  const std::size_t T = 29, M = 13;
  const std::vector<std::size_t> sizes{7, 1, 0, 5};
  const Terms terms = scale_per_term(make_terms(T, M, -8, 8, 41), -100, 100, 42);
  ExactSum reference = exact_words(terms, iota(T), sizes);
  const std::vector<float> reference_out = floats_of(reference);
  std::mt19937 rng(static_cast<std::uint32_t>(500 + me));  // orders differ per rank
  std::mt19937 split_rng(7);                               // splits agree across ranks
  for (int kind = 0; kind < 5; ++kind) {
    const std::vector<int> owner = owners(T, N, kind, split_rng);
    std::vector<std::size_t> order = iota(T), blocks = iota(sizes.size());
    std::shuffle(order.begin(), order.end(), rng);
    ExactSum sum(sizes);
    for (std::size_t t : order) {
      if (owner[t] != me) continue;
      std::shuffle(blocks.begin(), blocks.end(), rng);
      for (std::size_t b : blocks) sum.add_block(b, block_part(terms[t], sizes, b));
    }
    allreduce_exact(comm, sum);
    facts.check(same_bits(floats_of(sum), reference_out) && same_bins(sum, reference) &&
                    sum.terms() == static_cast<std::int64_t>(T),
                "block-wise split " + std::to_string(kind) + " differs from add()");
  }
  // Blocks with different counts: the words of add() with zeros where no term was added.
  ExactSum partial(sizes), masked(sizes);
  for (std::size_t t = 0; t < T; ++t) {
    partial.add_block(0, block_part(terms[t], sizes, 0));
    if (t < T / 2) partial.add_block(3, block_part(terms[t], sizes, 3));
    std::vector<float> term = terms[t];
    std::fill(term.begin() + 7, term.begin() + 8, 0.0f);            // block 1: no terms
    if (t >= T / 2) std::fill(term.begin() + 8, term.end(), 0.0f);  // block 3: half
    masked.add(term);
  }
  facts.check(same_bins(partial, masked), "add_block on some blocks differs from add with zeros");
  facts.check(partial.terms() == static_cast<std::int64_t>(T) && partial.block_terms(1) == 0 &&
                  partial.block_terms(3) == static_cast<std::int64_t>(T / 2),
              "the counts are not the most any block holds and each block's own");
  // The limit is per block; sizes and indices are checked.
  ExactSum two(std::vector<std::size_t>{1, 2});
  const float x = 1.0f;
  for (std::int64_t k = 0; k < ExactSum::kMaxTerms; ++k) two.add_block(0, std::span(&x, 1));
  const std::vector<float> pair{2.0f, 3.0f};
  facts.check(throws_as<ExactSumError>([&] { two.add_block(0, std::span(&x, 1)); }) &&
                  two.block_terms(0) == ExactSum::kMaxTerms &&
                  two.words()[0] == ExactSum::kMaxTerms && two.words()[3] == 0,  // 4096 · 2^0
              "a block's term beyond kMaxTerms was accepted or changed the sum");
  two.add_block(1, pair);
  facts.check(two.block_terms(1) == 1, "another block's term was refused");
  facts.check(throws_as<ExactSumError>([&] { two.add_block(1, std::span(&x, 1)); }) &&
                  throws_as<ExactSumError>([&] { two.add_block(2, pair); }),
              "a wrong size or block index was accepted");
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("allreduce_exact: non-finite terms on some ranks reach every rank") {
  Facts facts;
  Communicator comm;
  const int N = comm.size(), me = comm.rank();
  const float inf = std::numeric_limits<float>::infinity();
  // Element 0: NaN on the last rank; 1: +Inf on rank 0, -Inf on the last; 2: +Inf on rank 0.
  std::vector<float> row{1.0f, 1.0f, 1.0f, 1.0f};
  if (me == N - 1) row[0] = std::nanf("");
  if (me == 0) row[1] = row[2] = inf;
  if (me == N - 1) row[1] = N == 1 ? row[1] : -inf;
  for (bool scatter : {false, true}) {
    ExactSum sum(4);
    sum.add(row);
    if (N == 1) sum.add(std::vector<float>{0.0f, -inf, 0.0f, 0.0f});
    std::vector<float> out(4);
    if (scatter) {
      allreduce_exact(comm, sum, out);
    } else {
      allreduce_exact(comm, sum);
      sum.to_float(out);
    }
    facts.check(std::isnan(out[0]) && std::isnan(out[1]), "NaN or +Inf-Inf did not give NaN");
    facts.check(out[2] == inf && out[3] == static_cast<float>(N), "Inf or the finite sum is wrong");
  }
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("allreduce_exact: too many terms over ranks, or unequal sizes, throw everywhere") {
  Facts facts;
  Communicator comm;
  const int N = comm.size(), me = comm.rank();
  const std::int64_t each = (ExactSum::kMaxTerms + 1 + N - 1) / N;  // Σ over ranks > kMaxTerms
  ExactSum sum(3);
  const std::vector<float> row{1.0f, 0.5f, -2.0f};
  for (std::int64_t k = 0; k < std::min(each, ExactSum::kMaxTerms); ++k) sum.add(row);
  if (N == 1) {
    facts.check(throws_as<ExactSumError>([&] { sum.add(row); }), "kMaxTerms + 1 locally");
  } else {
    bool named = false;
    try {
      allreduce_exact(comm, sum);
    } catch (const ExactSumError& e) {
      named = std::string(e.what()).find("terms over") != std::string::npos;
    }
    facts.check(named, "the total over ranks beyond kMaxTerms was accepted");
    std::vector<float> out(3);
    facts.check(throws_as<ExactSumError>([&] { allreduce_exact(comm, sum, out); }),
                "the total over ranks beyond kMaxTerms was accepted by the reduce-scatter");
  }
  const std::vector<std::size_t> mine{5, me == 0 && N > 1 ? 6u : 5u};
  ExactSum unequal(mine);
  const bool threw = throws_as<ExactSumError>([&] { allreduce_exact(comm, unequal); });
  facts.check(threw == (N > 1),
              "unequal blocks were " + std::string(threw ? "" : "not ") + "refused");
  std::vector<float> out(unequal.size());
  const bool scatter_threw = throws_as<ExactSumError>([&] { allreduce_exact(comm, unequal, out); });
  facts.check(scatter_threw == (N > 1), "unequal blocks and the reduce-scatter");
  ExactSum fine(4);
  std::vector<float> wrong(me == N - 1 ? 5 : 4);  // a wrong output on the last rank only
  facts.check(throws_as<ExactSumError>([&] { allreduce_exact(comm, fine, wrong); }),
              "a wrong output length on one rank was not refused everywhere");
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("exact sum: double terms, in any grouping; beyond the range refused") {
  Facts facts;
  const std::size_t T = 40, M = 17;
  const Terms floats = scale_per_term(make_terms(T, M, -8, 8, 31), -100, 100, 32);
  // The same values as doubles give the same state as floats: one grid, one rounding rule.
  ExactSum as_float(M), as_double(M);
  for (const auto& term : floats) {
    as_float.add(term);
    as_double.add(std::vector<double>(term.begin(), term.end()));
  }
  facts.check(same_words(as_float, as_double), "float terms added as doubles differ");
  // Doubles with bits below float32's: x·(1 + 2^-40) rounds onto the grid; any grouping of
  // the rounded terms still gives the same words.
  std::vector<std::vector<double>> doubles;
  for (const auto& term : floats) {
    doubles.emplace_back(term.begin(), term.end());
    for (double& x : doubles.back()) x += std::ldexp(x, -40);
  }
  std::mt19937 rng(33);
  std::vector<std::size_t> order = iota(T);
  ExactSum reference(M);
  for (const auto& term : doubles) reference.add(term);
  for (int trial = 0; trial < 10; ++trial) {
    std::shuffle(order.begin(), order.end(), rng);
    ExactSum first(M), second(M);
    for (std::size_t k = 0; k < T; ++k) (k < T / 3 ? first : second).add(doubles[order[k]]);
    second.merge(first);
    facts.check(same_words(second, reference), "double trial " + std::to_string(trial));
  }
  const std::vector<double> huge(M, std::ldexp(1.0, 170));
  facts.check(throws_as<ExactSumError>([&] { reference.add(huge); }), "2^170 was accepted");
  facts.check(reference.terms() == static_cast<std::int64_t>(T), "the refused term was counted");
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("allreduce_exact: element counts 0, 1, N-1, N+1 (empty chunks on some ranks)") {
  Facts facts;
  Communicator comm;
  const int N = comm.size(), me = comm.rank();
  const auto n = static_cast<std::size_t>(N);
  for (std::size_t M : {std::size_t{0}, std::size_t{1}, n - 1, n + 1}) {
    const std::size_t T = 7;
    const Terms terms = make_terms(T, M, -20, 20, static_cast<std::uint32_t>(50 + M));
    const std::vector<float> reference = exact_sum(terms, iota(T), M);
    ExactSum sum(M);
    for (std::size_t t = 0; t < T; ++t)
      if (static_cast<int>(t % n) == me) sum.add(terms[t]);
    ExactSum consumed = sum;
    std::vector<float> out(M), scattered(M);
    allreduce_exact(comm, sum);
    sum.to_float(out);
    allreduce_exact(comm, consumed, scattered);
    facts.check(same_bits(out, reference) && same_bits(scattered, reference),
                "M = " + std::to_string(M) + " differs");
  }
  REQUIRE_ALL_RANKS(facts);
}
