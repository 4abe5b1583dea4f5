// Exact sums on an agreed grid (grid_sum.hpp) at N = 1..4: terms spread over many binades,
// with cancelling pairs, give the same bits in any order, any split over ranks and any mix of
// copied, borrowed, block-wise and in-place terms; every result is the float32 of the header's
// word, computed here in 128-bit integers, and lies within the header's error bound; too many
// terms, unequal blocks and a wrong output length throw on every rank; a non-finite term on
// one rank makes every rank's result NaN.
//
// Every rank builds the same global terms from a fixed seed and sums them alone in one order
// (the reference, on MPI_COMM_SELF); the distributed sums must equal it bit for bit. The
// reference does not depend on N, so the runs at N = 1, 2, 3, 4 compare against the same bits.
#include "ringtrain/collectives/grid_sum.hpp"

#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "mpi_test.hpp"
#include "ringtrain/collectives/grid_exchange.hpp"
#include "ringtrain/collectives/schedule.hpp"

using namespace ringtrain::collectives;
using ringtrain::testing::Facts;

namespace {

__extension__ typedef __int128 Int128;  // the exact reference (a GCC extension)

using Terms = std::vector<std::vector<float>>;  // (T, M): term t of every element

// Block sizes of the tests' sums: a large block (more than two of add_pieces's runs of 4,096
// elements), one element, an empty block, a block whose terms are all zero or subnormal.
const std::vector<std::size_t> kSizes{8200, 1, 0, 5};

// T terms over kSizes's blocks. Block 0: magnitudes 2^lo..2^hi with random signs, every third
// term the negation of the one before plus a part in 2^lo..2^(lo+10); block 1: 2^-10..2^10;
// block 3: zeros and subnormals.
Terms make_terms(std::size_t T, std::uint32_t seed, int lo = -60, int hi = 40) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  auto draw = [&](int lo, int hi) {
    const int e = lo + static_cast<int>(rng() % static_cast<unsigned>(hi - lo));
    return std::ldexp(mantissa(rng), e) * (rng() % 2 ? 1.0f : -1.0f);
  };
  Terms terms(T);
  for (std::size_t t = 0; t < T; ++t) {
    for (std::size_t i = 0; i < kSizes[0]; ++i) {
      float x = draw(lo, hi);
      if (t % 3 == 2) x = -terms[t - 1][i] + draw(lo, lo + 10);
      terms[t].push_back(x);
    }
    terms[t].push_back(draw(-10, 10));
    for (std::size_t i = 0; i < kSizes[3]; ++i)
      terms[t].push_back(rng() % 3 == 0 ? 0.0f : std::ldexp(float(1 + rng() % 100), -149));
  }
  return terms;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](float x, float y) {
           return std::bit_cast<std::uint32_t>(x) == std::bit_cast<std::uint32_t>(y);
         });
}

// The block's grid as the header defines it: power from the largest exponent field, precision
// from the count of terms.
int header_grid(const Terms& terms, std::size_t begin, std::size_t size) {
  int field = 1;
  for (const auto& term : terms)
    for (std::size_t i = begin; i < begin + size; ++i)
      field =
          std::max(field, static_cast<int>((std::bit_cast<std::uint32_t>(term[i]) >> 23) & 0xff));
  int c = 0;
  while ((std::size_t{1} << c) < terms.size()) ++c;
  return (field - 126) - (51 - c);
}

// round(x / 2^g), ties to even, in exact integers: x = m · 2^e with m an integer.
Int128 q_of(float x, int g) {
  int e = 0;
  const float f = std::frexp(x, &e);                      // x = f · 2^e, |f| in [0.5, 1)
  const auto m = static_cast<Int128>(std::ldexp(f, 24));  // exact: x = m · 2^(e − 24)
  const int s = g - (e - 24);                             // x / 2^g = m / 2^s
  if (m == 0) return 0;
  if (s <= 0) return m * (Int128{1} << -s);
  if (s >= 100) return 0;
  const Int128 magnitude = m < 0 ? -m : m;
  Int128 q = magnitude >> s;
  const Int128 r = magnitude - (q << s), half = Int128{1} << (s - 1);
  if (r > half || (r == half && (q & 1) != 0)) ++q;
  return m < 0 ? -q : q;
}

// float32(W · 2^g) of every element, from 128-bit words, on the blocks' grids g.
std::vector<float> result_on(const Terms& terms, const std::vector<int>& grids, Facts& facts) {
  std::vector<float> out;
  std::size_t begin = 0;
  for (std::size_t b = 0; b < kSizes.size(); ++b) {
    for (std::size_t i = begin; i < begin + kSizes[b]; ++i) {
      Int128 w = 0;
      for (const auto& term : terms) w += q_of(term[i], grids[b]);
      facts.check(w <= (Int128{1} << 51) && w >= -(Int128{1} << 51), "a word beyond 2^51");
      out.push_back(static_cast<float>(std::ldexp(static_cast<double>(w), grids[b])));
    }
    begin += kSizes[b];
  }
  return out;
}

// The header's result of every element: on the grids of the blocks' largest terms.
std::vector<float> header_result(const Terms& terms, Facts& facts) {
  std::vector<int> grids;
  std::size_t begin = 0;
  for (std::size_t size : kSizes) {
    grids.push_back(header_grid(terms, begin, size));
    begin += size;
  }
  return result_on(terms, grids, facts);
}

// The sum of `mine` (term indices) on `comm`, added in the order given; term k is added
// whole, borrowed, block by block, or block by block written in place, as k % 4 says.
bool grid_sum(const Communicator& comm, GridSum& sum, const Terms& terms,
              const std::vector<std::size_t>& mine, std::vector<float>& out) {
  sum.clear();
  for (std::size_t t : mine) {
    if (t % 4 == 0) {
      sum.add(terms[t]);
    } else if (t % 4 == 1) {
      sum.add(terms[t], GridSum::Keep::kBorrow);
    } else {
      std::size_t begin = 0;
      for (std::size_t b = 0; b < kSizes.size(); ++b) {
        const auto block = std::span(terms[t]).subspan(begin, kSizes[b]);
        if (t % 4 == 2) {
          sum.add_block(b, block);
        } else {
          std::ranges::copy(block, sum.next_term(b).begin());
          sum.add_written(b);
        }
        begin += kSizes[b];
      }
    }
  }
  out.assign(sum.size(), -1.0f);
  return allreduce_grid(comm, sum, out);
}

}  // namespace

TEST_CASE("grid sum: the header's worked example, in every order") {
  Facts facts;
  const Communicator self(MPI_COMM_SELF);
  const std::size_t one = 1;
  GridSum sum(std::span(&one, 1));
  const float tiny = std::ldexp(1.0f, -24);
  std::vector<float> order{1.0f, tiny, tiny};
  std::sort(order.begin(), order.end());
  do {
    sum.clear();
    for (const float& x : order) sum.add(std::span(&x, 1));
    float out = 0;
    allreduce_grid(self, sum, std::span(&out, 1));
    facts.check(out == 1.0f + std::ldexp(1.0f, -23), "an order gave " + std::to_string(out));
  } while (std::next_permutation(order.begin(), order.end()));
  facts.check((1.0f + tiny) + tiny == 1.0f, "the float32 sum does not depend on the order here");
  REQUIRE_ALL_RANKS(facts);
}

// A term written in place (next_term, add_written) counts like a copied one: its exponents
// set the grid when it holds the largest element, its NaN makes the sum NaN.
TEST_CASE("grid sum: a term written in place counts like a copied one") {
  Facts facts;
  const Communicator self(MPI_COMM_SELF);
  const std::size_t two = 2;
  GridSum sum(std::span(&two, 1));
  const std::vector<float> big{0x1p20f, 3.0f}, small{1.0f, 0x1p-30f};
  auto sum_of = [&](bool in_place, const std::vector<float>& first) {
    sum.clear();
    if (in_place) {
      std::ranges::copy(first, sum.next_term(0).begin());
      sum.add_written(0);
    } else {
      sum.add_block(0, first);
    }
    sum.add_block(0, small);
    std::vector<float> out(2);
    const bool finite = allreduce_grid(self, sum, out);
    return std::pair(finite, out);
  };
  const auto [copied_finite, copied] = sum_of(false, big);
  const auto [written_finite, written] = sum_of(true, big);
  facts.check(copied_finite && written_finite, "finite terms gave a non-finite sum");
  facts.check(copied == std::vector<float>{0x1p20f + 1.0f, 3.0f + 0x1p-30f},
              "the copied terms' sum is not exact");
  facts.check(same_bits(written, copied), "the term written in place gave other bits");
  const auto [nan_finite, nan_sum] = sum_of(true, {std::numeric_limits<float>::quiet_NaN(), 1.0f});
  facts.check(!nan_finite && std::isnan(nan_sum[1]), "a NaN written in place was not seen");
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("grid sum: results are the header's words, within its error bound") {
  Facts facts;
  const Communicator self(MPI_COMM_SELF);
  const Terms terms = make_terms(12, 21, -30, 30);  // exact sums below fit 128 bits
  GridSum sum(kSizes);
  std::vector<std::size_t> all(terms.size());
  std::iota(all.begin(), all.end(), 0);
  std::vector<float> out;
  facts.check(grid_sum(self, sum, terms, all, out), "finite terms gave a non-finite sum");
  facts.check(same_bits(out, header_result(terms, facts)), "a result is not float32(W · 2^g)");
  // |result − S| <= u·|S| + (1 + u)·n·X·2^(c − 51), S exact (on a grid below every term's
  // last bit: 2^-64, or 2^-160 for the block of subnormals)
  std::size_t begin = 0;
  for (std::size_t b = 0; b < kSizes.size(); ++b) {
    const std::size_t size = kSizes[b];
    const int exact_grid = b == 3 ? -160 : -64;
    double X = 0;
    for (const auto& term : terms)
      for (std::size_t i = begin; i < begin + size; ++i)
        X = std::max(X, double(std::fabs(term[i])));
    for (std::size_t i = begin; i < begin + size; ++i) {
      Int128 s = 0;
      for (const auto& term : terms) s += q_of(term[i], exact_grid);
      const long double S = std::ldexp(static_cast<long double>(s), exact_grid);
      const long double bound =
          std::ldexp(std::fabs(S), -24) + (1 + 0x1p-24) * 12 * X * 0x1p-47 + 0x1p-150;
      facts.check(std::fabs(static_cast<long double>(out[i]) - S) <= bound,
                  "element " + std::to_string(i) + " beyond the bound");
    }
    begin += size;
  }
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("allreduce_grid: any split and order over ranks gives the single-process bits") {
  Facts facts;
  const Communicator comm, self(MPI_COMM_SELF);
  const int N = comm.size(), me = comm.rank();
  const Terms terms = make_terms(29, 5);
  GridSum sum(kSizes);
  std::vector<std::size_t> all(terms.size());
  std::iota(all.begin(), all.end(), 0);
  std::vector<float> reference, out;
  grid_sum(self, sum, terms, all, reference);
  // The float32 sum of one element in two orders: the data can tell orders apart.
  float forward = 0, backward = 0;
  for (std::size_t t = 0; t < terms.size(); ++t) {
    forward += terms[t][0];
    backward += terms[terms.size() - 1 - t][0];
  }
  facts.check(forward != backward, "the float32 sums of element 0 agree in both orders");
  std::mt19937 split_rng(99);                              // splits agree across ranks
  std::mt19937 order_rng(static_cast<std::uint32_t>(me));  // orders differ per rank
  for (int kind = 0; kind < 5; ++kind) {
    std::vector<std::size_t> mine;
    for (std::size_t t = 0; t < terms.size(); ++t) {
      const std::size_t owner = kind == 0   ? t * std::size_t(N) / terms.size()  // contiguous
                                : kind == 1 ? t % std::size_t(N)                 // round-robin
                                : kind == 2 ? std::size_t(N) - 1                 // all on one
                                : kind == 3 ? (t < 3 ? 0 : std::size_t(N) - 1)   // uneven
                                            : split_rng() % std::size_t(N);      // random
      if (owner == std::size_t(me)) mine.push_back(t);
    }
    std::shuffle(mine.begin(), mine.end(), order_rng);
    facts.check(grid_sum(comm, sum, terms, mine, out), "finite terms gave a non-finite sum");
    facts.check(same_bits(out, reference), "split " + std::to_string(kind) + " differs");
  }
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("allreduce_grid: the range's ends: overflow to Inf, subnormal results, zeros") {
  Facts facts;
  const Communicator comm;
  const int N = comm.size(), me = comm.rank();
  const std::vector<std::size_t> sizes{1, 1, 1};
  GridSum sum(sizes);
  // Every rank adds its share of 4 terms: FLT_MAX (sum beyond the range), 2^-149 (exact
  // subnormal sum), 0.
  std::vector<float> out(3);
  for (int t = 0; t < 4; ++t)
    if (t % N == me) {
      const float term[3] = {FLT_MAX, std::ldexp(1.0f, -149), 0.0f};
      sum.add(term);
    }
  facts.check(allreduce_grid(comm, sum, out), "finite terms gave a non-finite sum");
  facts.check(std::isinf(out[0]) && out[0] > 0, "4 FLT_MAX gave " + std::to_string(out[0]));
  facts.check(out[1] == std::ldexp(1.0f, -147), "4 · 2^-149 is not 2^-147");
  facts.check(std::bit_cast<std::uint32_t>(out[2]) == 0, "zeros did not give +0");
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("allreduce_grid: a NaN or Inf on one rank makes every rank's sum NaN") {
  Facts facts;
  const Communicator comm;
  const int N = comm.size(), me = comm.rank();
  // Block 1 has 11 elements (eight for the vector loop of a fixed grid, a tail of three); the
  // bad term is its fourth, in a vector lane.
  const std::vector<std::size_t> sizes{2, 11};
  GridSum sum(sizes);
  for (bool fixed : {false, true})
    for (float bad :
         {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
      sum.clear();
      if (fixed)
        for (std::size_t b = 0; b < sizes.size(); ++b) sum.fix_grid(b, 5, N);  // terms below 32
      std::vector<float> term(13), out(13);
      std::iota(term.begin(), term.end(), 1.0f);
      if (me == N - 1) term[5] = bad;
      sum.add(term);
      const std::string grid = fixed ? " (fixed grid)" : "";
      facts.check(!allreduce_grid(comm, sum, out), "a non-finite term gave a finite sum" + grid);
      facts.check(std::all_of(out.begin(), out.end(), [](float x) { return std::isnan(x); }),
                  "the result is not NaN everywhere" + grid);
    }
  sum.clear();
  std::vector<float> term(13, 1.0f), out(13);
  sum.add(term);
  if (me == 0) sum.mark_non_finite();
  facts.check(!allreduce_grid(comm, sum, out), "mark_non_finite on rank 0 was not seen");
  REQUIRE_ALL_RANKS(facts);
}

// A sum large enough that each rank's chunk goes over the ring in several segments (more than
// 2^17 words a chunk at N = 2, 3, 4): every element equals the single-process sum.
TEST_CASE("allreduce_grid: chunks of several segments give the single-process bits") {
  Facts facts;
  const Communicator comm, self(MPI_COMM_SELF);
  const int N = comm.size(), me = comm.rank();
  const std::size_t size = 4 * 131072 + 12345;
  const std::vector<std::size_t> one_block{size};
  auto term_of = [&](int rank) {  // distinct magnitudes and signs per element and rank
    std::vector<float> term(size);
    for (std::size_t i = 0; i < size; ++i)
      term[i] = std::ldexp(float(1 + (i * 7 + std::size_t(rank) * 13) % 97),
                           int(i % 29) - 14) * ((i + std::size_t(rank)) % 3 == 0 ? -1.0f : 1.0f);
    return term;
  };
  GridSum alone(one_block), shared(one_block);
  for (int r = 0; r < N; ++r) alone.add(term_of(r));
  shared.add(term_of(me));
  std::vector<float> reference(size), out(size);
  facts.check(allreduce_grid(self, alone, reference), "finite terms gave a non-finite sum");
  facts.check(allreduce_grid(comm, shared, out), "finite terms gave a non-finite sum");
  facts.check(same_bits(out, reference), "the ring's sum differs from the single process's");
  REQUIRE_ALL_RANKS(facts);
}

// reduce_scatter_grid: this rank's chunk holds allreduce_grid's bits, the rest of the output
// is not touched; a sum that rounds to Inf in one rank's chunk only is not finite on every
// rank, as is a NaN term.
TEST_CASE("reduce_scatter_grid: the rank's chunk of allreduce_grid, and one verdict on finite") {
  Facts facts;
  const Communicator comm;
  const std::size_t N = std::size_t(comm.size()), me = std::size_t(comm.rank());
  const Terms terms = make_terms(13, 7);
  GridSum sum(kSizes);
  std::vector<std::size_t> mine;
  for (std::size_t t = me; t < terms.size(); t += N) mine.push_back(t);
  std::vector<float> whole;
  facts.check(grid_sum(comm, sum, terms, mine, whole), "finite terms gave a non-finite sum");
  const float untouched = 12345.0f;
  std::vector<float> chunk(sum.size(), untouched);
  facts.check(reduce_scatter_grid(comm, sum, chunk), "finite terms gave a non-finite sum");
  const std::size_t begin = chunk_begin(sum.size(), N, me),
                    end = begin + chunk_size(sum.size(), N, me);
  for (std::size_t i = 0; i < sum.size(); ++i) {
    const bool in_chunk = i >= begin && i < end;
    const float expected = in_chunk ? whole[i] : untouched;
    if (std::bit_cast<std::uint32_t>(chunk[i]) != std::bit_cast<std::uint32_t>(expected)) {
      facts.check(false, "element " + std::to_string(i) + (in_chunk ? " of" : " outside") +
                             " the chunk differs");
      break;
    }
  }
  // Element i of N elements (a block each, so each its own grid) lies in rank i's chunk.
  // FLT_MAX twice in the last rank's element overflows there alone; the other ranks' chunks
  // are finite.
  const std::vector<std::size_t> blocks(N, 1);
  GridSum overflow(blocks);
  for (int t = 0; t < 2; ++t) {
    std::vector<float> term(N, 1.0f);
    term[N - 1] = FLT_MAX;
    if (std::size_t(t) % N == me) overflow.add(term);
  }
  std::vector<float> out(N, 0.0f);
  facts.check(!reduce_scatter_grid(comm, overflow, out),
              "a sum that rounds to Inf in the last rank's chunk was called finite");
  facts.check(me == N - 1 ? std::isinf(out[me]) : out[me] == 2.0f,
              "the chunk's value is " + std::to_string(out[me]));
  overflow.clear();
  std::vector<float> bad(N, 1.0f);
  if (me == 0) bad[N - 1] = std::numeric_limits<float>::quiet_NaN();
  overflow.add(bad);
  facts.check(!reduce_scatter_grid(comm, overflow, out), "a NaN term gave a finite sum");
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("allreduce_grid: too many terms, unequal blocks or a wrong output throw everywhere") {
  Facts facts;
  const Communicator comm, self(MPI_COMM_SELF);
  const int N = comm.size(), me = comm.rank();
  const std::vector<std::size_t> one{1};
  const float x = 1.0f;
  // On one rank: the 2^12 + 1st term of a block is refused, nothing changed.
  GridSum full(one);
  for (std::int64_t t = 0; t < GridSum::kMaxTerms; ++t) full.add(std::span(&x, 1));
  bool refused = false;
  try {
    full.add(std::span(&x, 1));
  } catch (const ExactSumError&) {
    refused = true;
  }
  facts.check(refused && full.block_terms(0) == GridSum::kMaxTerms,
              "the 2^12 + 1st term was not refused, or changed the sum");
  // Over ranks: each rank holds fewer than 2^12, their total more (N >= 2; at N = 1 the
  // local refusal above is the same fact).
  auto throws_everywhere = [&](GridSum& sum, std::size_t out_size) {
    std::vector<float> out(out_size);
    bool threw = false;
    try {
      allreduce_grid(comm, sum, out);
    } catch (const ExactSumError&) {
      threw = true;
    }
    return ringtrain::testing::all_ranks(threw);
  };
  if (N > 1) {
    GridSum forged(one);
    const std::int64_t each = (GridSum::kMaxTerms + N) / N;  // Σ over ranks > kMaxTerms
    for (std::int64_t t = 0; t < each; ++t) forged.add(std::span(&x, 1));
    facts.check(throws_everywhere(forged, 1), "a total beyond 2^12 terms over ranks was summed");
  }
  const std::vector<std::size_t> mine{me == N - 1 ? std::size_t{2} : std::size_t{1}, 1};
  GridSum unequal(mine);
  facts.check(N == 1 || throws_everywhere(unequal, mine[0] + 1),
              "blocks of different sizes on different ranks were summed");
  GridSum fine(one);
  facts.check(throws_everywhere(fine, me == N - 1 ? 2 : 1),
              "a wrong output length on one rank was not refused everywhere");
  REQUIRE_ALL_RANKS(facts);
}

namespace {

// Each block's power fixed `extra` binades above its largest term (power_above of the
// largest |x|), as a bound above the terms would give it.
std::vector<int> fixed_powers(const Terms& terms, int extra) {
  std::vector<int> powers;
  std::size_t begin = 0;
  for (std::size_t size : kSizes) {
    double largest = 0;
    for (const auto& term : terms)
      for (std::size_t i = begin; i < begin + size; ++i)
        largest = std::max(largest, double(std::fabs(term[i])));
    powers.push_back(std::min(GridSum::power_above(largest) + extra, GridSum::kMaxPower));
    begin += size;
  }
  return powers;
}

// The result on the fixed grids g = power − (51 − c).
std::vector<float> fixed_result(const Terms& terms, const std::vector<int>& powers, Facts& facts) {
  int c = 0;
  while ((std::size_t{1} << c) < terms.size()) ++c;
  std::vector<int> grids;
  for (int power : powers) grids.push_back(power - (51 - c));
  return result_on(terms, grids, facts);
}

// Rank me's terms of T over N ranks: kind 0 round robin, 1 in contiguous runs.
std::vector<std::size_t> split_terms(std::size_t T, int kind, int N, int me) {
  std::vector<std::size_t> mine;
  for (std::size_t t = 0; t < T; ++t)
    if ((kind == 0 ? t % std::size_t(N) : t * std::size_t(N) / T) == std::size_t(me))
      mine.push_back(t);
  return mine;
}

// The sum of `mine` on fixed grids: `how` 0 adds each term whole (add), 1 block by block
// written in place (next_term, add_written), 2 in pieces of 7 elements, the pieces of all of
// the rank's terms interleaved piece by piece (add_pieces, as a layer's tiles come), 3 the
// same pieces of all of the rank's terms in one call, 4 as 3 in pieces of 19 (two runs of
// eight lanes and a tail of three, for the vector loop), 5 as 3 with the whole block as the
// piece (add_pieces's runs, and its groups of terms when a rank has more than eight).
bool fixed_sum(const Communicator& comm, GridSum& sum, const Terms& terms,
               const std::vector<std::size_t>& mine, const std::vector<int>& powers, int how,
               std::vector<float>& out) {
  sum.clear();
  for (std::size_t b = 0; b < kSizes.size(); ++b)
    sum.fix_grid(b, powers[b], static_cast<std::int64_t>(terms.size()));
  std::size_t begin = 0;
  for (std::size_t b = 0; b < kSizes.size(); ++b) {
    const std::size_t piece = how == 5 ? std::max<std::size_t>(kSizes[b], 1) : how == 4 ? 19 : 7;
    for (std::size_t at = 0; at < kSizes[b]; at += piece)
      for (std::size_t k = 0; k < mine.size(); ++k) {
        const auto block = std::span(terms[mine[k]]).subspan(begin, kSizes[b]);
        if (how == 0 && b == 0 && at == 0) sum.add(terms[mine[k]]);
        if (how == 1 && at == 0) {
          std::ranges::copy(block, sum.next_term(b).begin());
          sum.add_written(b);
        }
        if (how >= 3 && k == 0) {
          const std::size_t length = std::min(piece, kSizes[b] - at);
          std::vector<float> stacked;
          for (std::size_t t : mine) {
            const auto part = std::span(terms[t]).subspan(begin + at, length);
            stacked.insert(stacked.end(), part.begin(), part.end());
          }
          sum.add_pieces(b, at, length, stacked, 0);
        }
        if (how == 2)
          sum.add_pieces(b, at, std::min<std::size_t>(7, kSizes[b] - at),
                         block.subspan(at, std::min<std::size_t>(7, kSizes[b] - at)),
                         static_cast<std::int64_t>(k));
      }
    begin += kSizes[b];
  }
  out.assign(sum.size(), -1.0f);
  return allreduce_grid(comm, sum, out);
}

}  // namespace

// Fixed grids (fix_grid): the terms rounded as they come onto a grid fixed above them give
// float32(W · 2^g) of that grid, for any split over ranks, any order, whole or in pieces.
TEST_CASE("allreduce_grid, fixed grids: any split, order and pieces give the grid's words") {
  Facts facts;
  const Communicator comm;
  const int N = comm.size(), me = comm.rank();
  const Terms terms = make_terms(13, 17, -30, 30);
  GridSum sum(kSizes);
  for (int extra : {0, 9}) {
    const std::vector<int> powers = fixed_powers(terms, extra);
    const std::vector<float> reference = fixed_result(terms, powers, facts);
    std::mt19937 order_rng(static_cast<std::uint32_t>(me + 7 * extra));
    for (int how = 0; how < 6; ++how)
      for (int kind = 0; kind < 2; ++kind) {
        std::vector<std::size_t> mine = split_terms(terms.size(), kind, N, me);
        std::shuffle(mine.begin(), mine.end(), order_rng);
        std::vector<float> out;
        facts.check(fixed_sum(comm, sum, terms, mine, powers, how, out),
                    "finite terms gave a non-finite sum");
        facts.check(same_bits(out, reference), "extra " + std::to_string(extra) + ", how " +
                                                   std::to_string(how) + ", split " +
                                                   std::to_string(kind) + " differs");
      }
  }
  // A grid fixed 9 binades higher keeps fewer bits: element 0's sums differ somewhere.
  facts.check(!same_bits(fixed_result(terms, fixed_powers(terms, 0), facts),
                         fixed_result(terms, fixed_powers(terms, 9), facts)),
              "the power does not change the words");
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("grid sum: power_above is the smallest power of 2 above a bound, within the range") {
  CHECK(GridSum::power_above(1.0) == 1);
  CHECK(GridSum::power_above(0.75) == 0);
  CHECK(GridSum::power_above(std::nextafter(1.0, 0.0)) == 0);
  CHECK(GridSum::power_above(0.0) == GridSum::kMinPower);
  CHECK(GridSum::power_above(1e-300) == GridSum::kMinPower);
  CHECK(GridSum::power_above(0x1p127) == 128);
  CHECK(GridSum::power_above(0x1p200) == GridSum::kMaxPower);
  CHECK(GridSum::power_above(std::numeric_limits<double>::infinity()) == GridSum::kMaxPower);
  CHECK(GridSum::power_above(std::numeric_limits<double>::quiet_NaN()) == GridSum::kMaxPower);
}

// A term at 2^E of a grid fixed from E, different fixed grids on different ranks, a grid
// fixed on some ranks only, or more terms than the grid was fixed for: every rank throws.
TEST_CASE(
    "allreduce_grid, fixed grids: a term beyond the bound or unequal grids throw everywhere") {
  Facts facts;
  const Communicator comm;
  const int N = comm.size(), me = comm.rank();
  // One block of 11 elements (eight for the vector loop, a tail of three), x at element `at`,
  // the others within 2^1.
  const std::vector<std::size_t> one{11};
  const bool last = me == N - 1;
  auto throws_everywhere = [&](int power, bool fix, std::int64_t total, float x, int terms,
                               std::size_t at = 1) {
    GridSum sum(one);
    if (fix) sum.fix_grid(0, power, total);
    std::vector<float> term(11, 0.5f);
    term[2] = -0.25f;
    term[at] = x;
    for (int t = 0; t < terms; ++t) sum.add(term);
    std::vector<float> out(11);
    bool threw = false;
    try {
      allreduce_grid(comm, sum, out);
    } catch (const ExactSumError&) {
      threw = true;
    }
    return ringtrain::testing::all_ranks(threw);
  };
  facts.check(!throws_everywhere(1, true, N, 1.5f, 1), "terms within the bound were refused");
  facts.check(throws_everywhere(1, true, N, last ? 2.0f : 1.5f, 1),
              "a term at 2^E on the last rank was summed");
  facts.check(throws_everywhere(1, true, N, last ? 2.0f : 1.5f, 1, 9),
              "a term at 2^E in the vector loop's tail on the last rank was summed");
  facts.check(throws_everywhere(1, true, N, last ? -3.0f : 1.5f, 1),
              "a term beyond -2^E on the last rank was summed");
  facts.check(throws_everywhere(1, true, N, 1.5f, last ? 2 : 1),
              "more terms than the grid was fixed for were summed");
  if (N > 1) {
    facts.check(throws_everywhere(last ? 2 : 1, true, N, 1.5f, 1),
                "different fixed powers on different ranks were summed");
    facts.check(throws_everywhere(1, true, last ? N + 1 : N, 1.5f, 1),
                "different fixed totals on different ranks were summed");
    facts.check(throws_everywhere(1, !last, N, 1.5f, 1),
                "a grid fixed on some ranks only was summed");
  }
  // Refused at once, on the rank that calls it: a power outside the range, a fix after a term.
  GridSum sum(one);
  CHECK_THROWS_AS(sum.fix_grid(0, GridSum::kMaxPower + 1, 1), ExactSumError);
  CHECK_THROWS_AS(sum.fix_grid(0, 0, GridSum::kMaxTerms + 1), ExactSumError);
  const std::vector<float> term(11, 1.0f);
  sum.add(term);
  CHECK_THROWS_AS(sum.fix_grid(0, 4, 1), ExactSumError);
  CHECK_THROWS_AS(sum.add_pieces(0, 0, 11, term, 0), ExactSumError);  // not a fixed block
  REQUIRE_ALL_RANKS(facts);
}

// Words summed over ranks range by range (grid_exchange.hpp), each range started once its
// blocks hold their terms, from the last block to the first as backward finishes layers,
// give allreduce_grid's bits for any split; the blocks left over are started by
// round_exchanged_grid. A NaN on one rank makes every rank's result NaN; a block whose grid is
// not fixed cannot start early.
namespace {

// The fixed sum of `mine`, block by block from the last; after block b the range from b on
// starts if `starts` holds b.
bool exchanged_sum(const Communicator& comm, GridSum& sum, GridExchange& exchange,
                   const Terms& terms, const std::vector<std::size_t>& mine,
                   const std::vector<int>& powers, const std::vector<std::size_t>& starts,
                   std::vector<float>& out) {
  sum.clear();
  exchange.begin(comm, sum);
  std::vector<std::size_t> begins{0};
  for (std::size_t size : kSizes) begins.push_back(begins.back() + size);
  for (std::size_t b = kSizes.size(); b-- > 0;) {
    sum.fix_grid(b, powers[b], static_cast<std::int64_t>(terms.size()));
    std::vector<float> stacked;
    for (std::size_t t : mine)
      stacked.insert(stacked.end(), terms[t].begin() + std::ptrdiff_t(begins[b]),
                     terms[t].begin() + std::ptrdiff_t(begins[b + 1]));
    sum.add_pieces(b, 0, kSizes[b], stacked, 0);
    exchange.progress();
    if (std::ranges::find(starts, b) != starts.end()) exchange.start_from(b);
  }
  out.assign(sum.size(), -1.0f);
  return round_exchanged_grid(comm, sum, exchange, out);
}

}  // namespace

TEST_CASE("round_exchanged_grid: ranges started as blocks complete give allreduce_grid's bits") {
  Facts facts;
  const Communicator comm;
  const int N = comm.size(), me = comm.rank();
  const Terms terms = make_terms(13, 17, -30, 30);
  const std::vector<int> powers = fixed_powers(terms, 0);
  const std::vector<float> reference = fixed_result(terms, powers, facts);
  GridSum sum(kSizes);
  GridExchange exchange;
  const std::vector<std::vector<std::size_t>> patterns{{}, {3, 1, 0}, {2}, {0}, {3, 2, 1, 0}};
  for (int kind = 0; kind < 2; ++kind)
    for (std::size_t p = 0; p < patterns.size(); ++p) {
      const std::vector<std::size_t> mine = split_terms(terms.size(), kind, N, me);
      std::vector<float> out;
      facts.check(exchanged_sum(comm, sum, exchange, terms, mine, powers, patterns[p], out),
                  "finite terms gave a non-finite sum");
      facts.check(same_bits(out, reference),
                  "pattern " + std::to_string(p) + ", split " + std::to_string(kind) + " differs");
    }
  // A NaN among one rank's terms: every rank's result is NaN, and every rank says so.
  Terms poisoned = terms;
  poisoned[0][3] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> out;
  facts.check(!exchanged_sum(comm, sum, exchange, poisoned, split_terms(terms.size(), 0, N, me),
                             powers, {3, 0}, out),
              "a NaN term gave a finite sum");
  facts.check(std::ranges::all_of(out, [](float x) { return std::isnan(x); }),
              "a NaN term left some element finite");
  // A block that keeps its terms (no fixed grid) cannot start before the sum.
  GridSum kept(kSizes);
  GridExchange early;
  early.begin(comm, kept);
  kept.add(terms[0]);
  bool refused = false;
  try {
    early.start_from(0);
  } catch (const ExactSumError&) {
    refused = true;
  }
  facts.check(refused, "a block without a fixed grid started early");
  REQUIRE_ALL_RANKS(facts);
}
