// Exact sums on an agreed grid (see grid_sum.hpp): float32 terms kept until the sum, each
// rounded once onto its block's grid into one int64 word per element, the words summed over
// ranks, one rounding back to float32.
#include "ringtrain/collectives/grid_sum.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "exact_words.hpp"
#include "ringtrain/collectives/ring.hpp"
#include "ringtrain/collectives/small.hpp"

namespace ringtrain::collectives {

namespace {

using exact_words::ExponentScan;
using exact_words::has_avx2;
using exact_words::kMagic;
using exact_words::kMagicBits;
using exact_words::Layout;

// The power E of a block whose largest exponent field is `field` (grid_sum.hpp).
int power_of(int field) {
  return std::max(field, 1) - Layout<float>::kBias;
}

// The precision p of a block of n terms in total: 51 − ceil(log2 n), so that n words of at
// most 2^p sum to at most 2^51 (grid_sum.hpp).
int precision_of(std::int64_t n) {
  int bits = 0;
  while ((std::int64_t{1} << bits) < n) ++bits;
  return GridSum::kWordBits - bits;
}

// words[i] (+)= round(x_i · scale), to nearest, ties to even. scale = 2^-g makes the product
// exact and below 2^p <= 2^51 in magnitude (|x| < 2^E, g = E − p), where the magic constant
// rounds it.
// kFirst: the first term writes the words, so they need no clearing.
template <bool kFirst>
[[gnu::always_inline]] inline void convert_loop(const float* x, std::size_t n, double scale,
                                                std::int64_t* words) {
  for (std::size_t i = 0; i < n; ++i) {
    const double t = static_cast<double>(x[i]) * scale + kMagic;
    const std::int64_t q = std::bit_cast<std::int64_t>(t) - kMagicBits;
    words[i] = kFirst ? q : words[i] + q;
  }
}

// out[i] <- float32(words[i] · 2^g), rounded once: |words[i]| <= 2^51, so the word and its
// scaled value are exact doubles (no double reaches the range's ends: |g| <= 190), and the
// conversion to float32 is the only rounding, subnormal and overflowing results included.
[[gnu::always_inline]] inline void round_loop(const std::int64_t* words, std::size_t n, int grid,
                                              float* out) {
  const double scale = std::ldexp(1.0, grid);
  for (std::size_t i = 0; i < n; ++i)
    out[i] = static_cast<float>(exact_words::word_to_double(words[i]) * scale);
}

// The loops compiled for AVX2 as well, chosen at run time; every operation is exact or
// correctly rounded, so both copies give the same bits.
template <bool kFirst>
[[gnu::target("avx2")]] void convert_avx2(const float* x, std::size_t n, double scale,
                                          std::int64_t* words) {
  convert_loop<kFirst>(x, n, scale, words);
}
[[gnu::target("avx2")]] void round_avx2(const std::int64_t* words, std::size_t n, int grid,
                                        float* out) {
  round_loop(words, n, grid, out);
}
[[gnu::target("avx2")]] ExponentScan scan_avx2(std::span<const float> terms) {
  return exact_words::scan_loop(terms);
}
[[gnu::target("avx2")]] ExponentScan copy_scan_avx2(std::span<const float> terms, float* to) {
  return exact_words::scan_loop<float, true>(terms, to);
}

template <bool kFirst>
void add_on_grid(const float* x, std::size_t n, double scale, std::int64_t* words) {
  if (has_avx2()) return convert_avx2<kFirst>(x, n, scale, words);
  convert_loop<kFirst>(x, n, scale, words);
}

void round_words(const std::int64_t* words, std::size_t n, int grid, float* out) {
  if (has_avx2()) return round_avx2(words, n, grid, out);
  round_loop(words, n, grid, out);
}

// The scan of `terms`, copied to `to` unless it is null.
ExponentScan scan(std::span<const float> terms, float* to) {
  if (to)
    return has_avx2() ? copy_scan_avx2(terms, to) : exact_words::scan_loop<float, true>(terms, to);
  return has_avx2() ? scan_avx2(terms) : exact_words::scan_loop(terms);
}

}  // namespace

GridSum::GridSum(std::span<const std::size_t> block_sizes)
    : begin_(1, 0),
      kept_(block_sizes.size()),
      kept_used_(block_sizes.size(), 0),
      borrowed_(block_sizes.size()),
      terms_(block_sizes.size(), 0),
      max_field_(block_sizes.size(), 0) {
  for (std::size_t size : block_sizes) begin_.push_back(begin_.back() + size);
}

void GridSum::clear() {
  std::fill(kept_used_.begin(), kept_used_.end(), 0);
  for (std::vector<const float*>& borrowed : borrowed_) borrowed.clear();
  std::fill(terms_.begin(), terms_.end(), 0);
  std::fill(max_field_.begin(), max_field_.end(), 0);
  non_finite_ = false;
}

void GridSum::check_block_term(std::size_t block, std::size_t size) const {
  if (block >= kept_.size() || size != block_size(block))
    throw ExactSumError(
        "grid sum: " + std::to_string(size) + " terms for block " + std::to_string(block) + " of " +
        std::to_string(kept_.size()) +
        (block < kept_.size() ? " (" + std::to_string(block_size(block)) + ")" : std::string()));
  if (terms_[block] >= kMaxTerms)
    throw ExactSumError("grid sum: block " + std::to_string(block) + " already holds " +
                        std::to_string(terms_[block]) +
                        " terms, the most it sums exactly; sum "
                        "fewer terms per block (a larger micro-batch)");
}

float* GridSum::room(std::size_t block, std::size_t size) {
  std::vector<float>& kept = kept_[block];
  const std::size_t used = kept_used_[block];
  if (kept.size() < used + size) kept.resize(used + size);  // else reused from earlier sums
  return kept.data() + used;
}

void GridSum::count(std::size_t block, int max_field, bool non_finite) {
  non_finite_ |= non_finite;
  max_field_[block] = std::max(max_field_[block], max_field);
  ++terms_[block];
}

void GridSum::keep(std::size_t block, std::span<const float> terms, Keep keep) {
  float* to = nullptr;
  if (keep == Keep::kCopy) {
    to = room(block, terms.size());
    kept_used_[block] += terms.size();
  } else {
    borrowed_[block].push_back(terms.data());
  }
  const ExponentScan found = scan(terms, to);
  count(block, found.max_exponent, found.non_finite);
}

void GridSum::add(std::span<const float> terms, Keep keep) {
  if (terms.size() != size())
    throw ExactSumError("grid sum: " + std::to_string(terms.size()) + " terms for " +
                        std::to_string(size()) + " elements");
  for (std::size_t b = 0; b < kept_.size(); ++b) check_block_term(b, block_size(b));
  for (std::size_t b = 0; b < kept_.size(); ++b)
    this->keep(b, terms.subspan(begin_[b], block_size(b)), keep);
}

void GridSum::add_block(std::size_t block, std::span<const float> terms) {
  check_block_term(block, terms.size());
  keep(block, terms, Keep::kCopy);
}

std::span<float> GridSum::next_term(std::size_t block) {
  check_block_term(block, block < blocks() ? block_size(block) : 0);
  return {room(block, block_size(block)), block_size(block)};
}

void GridSum::add_written(std::size_t block) {
  check_block_term(block, block < blocks() ? block_size(block) : 0);
  const std::size_t n = block_size(block);
  if (kept_[block].size() < kept_used_[block] + n)
    throw ExactSumError("grid sum: add_written(" + std::to_string(block) +
                        ") without next_term for it");
  const ExponentScan found = scan({kept_[block].data() + kept_used_[block], n}, nullptr);
  kept_used_[block] += n;
  count(block, found.max_exponent, found.non_finite);
}

void GridSum::convert(std::span<const int> grids) {
  // Words in pieces that stay in L1 while every term is added to them: the words are written
  // to memory once, however many terms there are.
  constexpr std::size_t kPiece = 1024;
  words_.resize(size());
  std::vector<const float*> terms;
  for (std::size_t b = 0; b < kept_.size(); ++b) {
    const std::size_t n = block_size(b);
    std::int64_t* words = words_.data() + begin_[b];
    if (terms_[b] == 0) std::fill_n(words, n, 0);
    const double scale = std::ldexp(1.0, -grids[b]);
    terms = borrowed_[b];
    for (std::size_t at = 0; at < kept_used_[b]; at += n) terms.push_back(kept_[b].data() + at);
    for (std::size_t first = 0; first < n; first += kPiece) {
      const std::size_t count = std::min(kPiece, n - first);
      for (std::size_t t = 0; t < terms.size(); ++t) {
        if (t == 0)
          add_on_grid<true>(terms[t] + first, count, scale, words + first);
        else
          add_on_grid<false>(terms[t] + first, count, scale, words + first);
      }
    }
  }
}

namespace {

// The ranks agree on every block's grid and that the sum is finite, after checking that every
// rank passes the same blocks, an out of the right length and at most kMaxTerms terms per
// block in total: a small max (largest exponent field, size and −size per block, the
// non-finite flag, a wrong out length) and a small sum (the terms per block). Every rank
// throws the same error, or none does. Returns the grids; `finite` whether the sum is.
std::vector<int> agree_grids(const Communicator& comm, std::span<const int> fields,
                             std::span<const std::size_t> sizes,
                             std::span<const std::int64_t> terms, bool non_finite, bool wrong_out,
                             bool& finite) {
  const std::size_t B = fields.size();
  check_same_size(comm, B, "allreduce_grid (number of blocks)");
  std::vector<double> facts(3 * B + 2), totals(B);
  for (std::size_t b = 0; b < B; ++b) {
    facts[3 * b] = fields[b];
    facts[3 * b + 1] = static_cast<double>(sizes[b]);
    facts[3 * b + 2] = -static_cast<double>(sizes[b]);
    totals[b] = static_cast<double>(terms[b]);
  }
  facts[3 * B] = non_finite ? 1 : 0;
  facts[3 * B + 1] = wrong_out ? 1 : 0;
  allreduce_max(comm, facts);
  allreduce_sum(comm, totals);  // exact: integers below 2^53
  if (facts[3 * B + 1] != 0)
    throw ExactSumError(
        "allreduce_grid: an output span does not match the sum's elements on "
        "some rank");
  std::vector<int> grids(B);
  for (std::size_t b = 0; b < B; ++b) {
    if (facts[3 * b + 1] != -facts[3 * b + 2])
      throw ExactSumError("allreduce_grid: block " + std::to_string(b) +
                          " has different sizes on different ranks; every rank must pass the "
                          "same blocks");
    if (totals[b] > static_cast<double>(GridSum::kMaxTerms))
      throw ExactSumError("allreduce_grid: block " + std::to_string(b) + " holds " +
                          std::to_string(static_cast<std::int64_t>(totals[b])) + " terms over " +
                          std::to_string(comm.size()) + " ranks, more than the " +
                          std::to_string(GridSum::kMaxTerms) + " it sums exactly");
    grids[b] = power_of(static_cast<int>(facts[3 * b])) -
               precision_of(static_cast<std::int64_t>(totals[b]));
  }
  finite = facts[3 * B] == 0;
  return grids;
}

}  // namespace

bool allreduce_grid(const Communicator& comm, GridSum& sum, std::span<float> out) {
  const std::size_t M = sum.size();
  std::vector<std::size_t> sizes(sum.blocks());
  for (std::size_t b = 0; b < sizes.size(); ++b) sizes[b] = sum.block_size(b);
  bool finite = true;
  const std::vector<int> grids = agree_grids(comm, sum.max_field_, sizes, sum.terms_,
                                             sum.non_finite_, out.size() != M, finite);
  if (M > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw ExactSumError("allreduce_grid: " + std::to_string(M) +
                        " elements are too many for one call");
  if (!finite) {
    std::fill(out.begin(), out.end(), std::numeric_limits<float>::quiet_NaN());
    return false;
  }
  sum.convert(grids);
  std::vector<int> counts, begins;
  exact_words::chunk_table(M, comm.size(), counts, begins);
  const auto mine = static_cast<std::size_t>(comm.rank());
  const auto first = static_cast<std::size_t>(begins[mine]);
  const auto last = first + static_cast<std::size_t>(counts[mine]);
  // In place: this rank's summed chunk lands at the start of the words (MPI_IN_PLACE).
  if (comm.size() > 1)
    check_mpi(MPI_Reduce_scatter(MPI_IN_PLACE, sum.words_.data(), counts.data(), MPI_INT64_T,
                                 MPI_SUM, comm.handle()),
              "MPI_Reduce_scatter(grid words)");
  const std::int64_t* words = sum.words_.data();    // this rank's chunk, summed
  for (std::size_t b = 0; b < sizes.size(); ++b) {  // the part of block b in [first, last)
    const std::size_t begin = std::max(sum.begin_[b], first);
    const std::size_t end = std::min(sum.begin_[b + 1], last);
    if (begin < end) round_words(words + (begin - first), end - begin, grids[b], &out[begin]);
  }
  if (comm.size() > 1) all_gather(comm, out);
  return true;
}

}  // namespace ringtrain::collectives
