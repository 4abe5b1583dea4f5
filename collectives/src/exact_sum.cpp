// Exact sums (see exact_sum.hpp): float32 terms rounded once onto a block's grid as two
// int64 bins per element, integer sums over terms and ranks, one rounding back to float32.
#include "ringtrain/collectives/exact_sum.hpp"

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "exact_words.hpp"
#include "ringtrain/collectives/ring.hpp"
#include "ringtrain/collectives/schedule.hpp"
#include "ringtrain/collectives/small.hpp"

namespace ringtrain::collectives {

namespace {

using exact_words::chunk_table;
using exact_words::exponent_field;
using exact_words::ExponentScan;
using exact_words::has_avx2;
using exact_words::kMagic;
using exact_words::kMagicBits;
using exact_words::Layout;
using exact_words::round_sum_to_float;
using exact_words::scan_loop;
using exact_words::word_to_double;
constexpr double kBin = 0x1p40, kInvBin = 0x1p-40;  // 2^kBinBits and its inverse
static_assert(ExactSum::kBinBits == 40, "kBin and kInvBin are 2^±kBinBits");

// The sum of an element that saw non-finite terms, as IEEE addition gives it in any order.
float non_finite_result(std::uint8_t flags) {
  const bool plus = flags & ExactSum::kSawPlusInf, minus = flags & ExactSum::kSawMinusInf;
  if ((flags & ExactSum::kSawNan) || (plus && minus))
    return std::numeric_limits<float>::quiet_NaN();
  return plus ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
}

std::string terms_text(std::int64_t held, std::int64_t more) {
  return "exact sum: " + std::to_string(held) + " terms plus " + std::to_string(more) +
         " exceed the " + std::to_string(ExactSum::kMaxTerms) +
         " a block holds exactly; sum fewer terms per block (a larger micro-batch)";
}

}  // namespace

ExactSum::ExactSum(std::size_t elements) : ExactSum(std::span<const std::size_t>(&elements, 1)) {}

ExactSum::ExactSum(std::span<const std::size_t> block_sizes)
    : begin_(1, 0), tops_(block_sizes.size(), kMinTop) {
  for (std::size_t size : block_sizes) begin_.push_back(begin_.back() + size);
  elements_ = begin_.back();
  words_.assign(2 * elements_ + 1, 0);
  flags_.assign(elements_, 0);
  block_terms_.assign(tops_.size(), 0);
  zero_.assign(tops_.size(), 1);
}

void ExactSum::clear() {
  std::fill(words_.begin(), words_.end(), 0);
  std::fill(flags_.begin(), flags_.end(), 0);
  std::fill(tops_.begin(), tops_.end(), kMinTop);
  std::fill(block_terms_.begin(), block_terms_.end(), 0);
  std::fill(zero_.begin(), zero_.end(), char{1});
  any_non_finite_ = false;
}

void ExactSum::raise_top(std::size_t block, int top) {
  if (block >= tops_.size() || top < tops_[block] || top > kMaxTop)
    throw ExactSumError("exact sum: window " + std::to_string(top) + " for block " +
                        std::to_string(block) + " of " + std::to_string(tops_.size()) +
                        " is not in [current, " + std::to_string(kMaxTop) + "]");
  const int shift = top - tops_[block];
  if (shift == 0) return;
  if (zero_[block]) {  // zeros at any window: nothing to move (the first term of a step)
    tops_[block] = top;
    return;
  }
  const auto begin = static_cast<std::ptrdiff_t>(begin_[block]);
  const auto end = static_cast<std::ptrdiff_t>(begin_[block + 1]);
  const auto M = static_cast<std::ptrdiff_t>(elements_);
  auto hi = words_.begin(), lo = words_.begin() + M;
  if (shift == 1)
    std::copy(hi + begin, hi + end, lo + begin);  // the old top bin is the new lower bin
  else
    std::fill(lo + begin, lo + end, 0);
  std::fill(hi + begin, hi + end, 0);
  tops_[block] = top;
}

namespace {

// The smallest valid top for terms with |x| < 2^e: the top k needs
// e <= lsb(k+1) − 1 = kBinBits·(k+1) + kBinOffset − 1. Float32 terms always fit; a double
// beyond 2^159 does not, and is refused rather than summed wrongly.
int top_for_power(int e) {
  const int need = e - ExactSum::kBinOffset + 1;
  const int top =
      need <= 0 ? ExactSum::kMinTop : (need + ExactSum::kBinBits - 1) / ExactSum::kBinBits - 1;
  if (top > ExactSum::kMaxTop)
    throw ExactSumError(
        "exact sum: a term of magnitude up to 2^" + std::to_string(e) +
        " is beyond the accumulator's range (|x| <= 2^" +
        std::to_string(ExactSum::kBinOffset + ExactSum::kBinBits * (ExactSum::kMaxTop + 1) - 1) +
        "); nothing was added");
  return std::max(top, ExactSum::kMinTop);
}

// hi[i] += round_top(x_i), lo[i] += the slice below it, for the grid 2^grid. Non-finite
// terms count as zero here (their flags are recorded separately). Branch-free, so it
// vectorises.
// For double terms the rounding onto the grid happens in `below + kMagic`; `below` is still
// exact (at most 2^39 in magnitude and a multiple of v's last bit: 53 bits suffice).
template <typename T>
[[gnu::always_inline]] inline void deposit_loop(std::span<const T> terms, int grid,
                                                std::int64_t* hi, std::int64_t* lo) {
  using Bits = typename Layout<T>::Bits;
  const double scale = std::ldexp(1.0, -grid);
  const std::size_t M = terms.size();
  for (std::size_t i = 0; i < M; ++i) {
    const auto bits = std::bit_cast<Bits>(terms[i]);
    const Bits finite = exponent_field(terms[i]) == Layout<T>::kMask ? Bits{0} : ~Bits{0};
    const double v = static_cast<double>(std::bit_cast<T>(bits & finite)) * scale;  // exact
    const double t = v * kInvBin + kMagic;                 // |v·2^-40| <= 2^39
    hi[i] += std::bit_cast<std::int64_t>(t) - kMagicBits;  // round(v / 2^40)
    const double below = v - (t - kMagic) * kBin;          // exact, |below| <= 2^39
    lo[i] += std::bit_cast<std::int64_t>(below + kMagic) - kMagicBits;
  }
}

// The two loops compiled for AVX2 as well, chosen at run time: twice the lanes of the
// baseline's SSE2. Every operation is exact or correctly rounded, so both give the same bits.
template <typename T>
[[gnu::target("avx2")]] void deposit_avx2(std::span<const T> terms, int grid, std::int64_t* hi,
                                          std::int64_t* lo) {
  deposit_loop(terms, grid, hi, lo);
}
template <typename T>
[[gnu::target("avx2")]] ExponentScan scan_avx2(std::span<const T> terms) {
  return scan_loop(terms);
}

template <typename T>
void deposit(std::span<const T> terms, int grid, std::int64_t* hi, std::int64_t* lo) {
  if (has_avx2()) return deposit_avx2(terms, grid, hi, lo);
  deposit_loop(terms, grid, hi, lo);
}

template <typename T>
ExponentScan scan_exponents(std::span<const T> terms) {
  return has_avx2() ? scan_avx2(terms) : scan_loop(terms);
}

// out[i] <- float32(hi[i]·hi_scale + lo[i]·lo_scale), rounded once. |words| <= 2^51, so
// they and their scaled values are exact doubles.
[[gnu::always_inline]] inline void round_loop(const std::int64_t* hi, const std::int64_t* lo,
                                              double hi_scale, double lo_scale,
                                              std::span<float> out) {
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = round_sum_to_float(word_to_double(hi[i]) * hi_scale, word_to_double(lo[i]) * lo_scale);
}

[[gnu::target("avx2")]] void round_avx2(const std::int64_t* hi, const std::int64_t* lo,
                                        double hi_scale, double lo_scale, std::span<float> out) {
  round_loop(hi, lo, hi_scale, lo_scale, out);
}

void round_words(const std::int64_t* hi, const std::int64_t* lo, double hi_scale, double lo_scale,
                 std::span<float> out) {
  if (has_avx2()) return round_avx2(hi, lo, hi_scale, lo_scale, out);
  round_loop(hi, lo, hi_scale, lo_scale, out);
}

}  // namespace

namespace {

// Flags of the non-finite terms: NaN, +Inf, -Inf.
template <typename T>
void record_non_finite(std::span<const T> terms, std::span<std::uint8_t> flags) {
  for (std::size_t i = 0; i < terms.size(); ++i) {
    const T x = terms[i];
    if (std::isnan(x))
      flags[i] |= ExactSum::kSawNan;
    else if (std::isinf(x))
      flags[i] |= x > 0 ? ExactSum::kSawPlusInf : ExactSum::kSawMinusInf;
  }
}

}  // namespace

template <typename T>
void ExactSum::add_terms(std::span<const T> terms) {
  if (terms.size() != elements_)
    throw ExactSumError("exact sum: " + std::to_string(terms.size()) + " terms for " +
                        std::to_string(elements_) + " elements");
  if (this->terms() >= kMaxTerms) throw ExactSumError(terms_text(this->terms(), 1));
  std::vector<int> tops(tops_.size());
  bool non_finite = false;
  for (std::size_t b = 0; b < tops_.size(); ++b)  // every check before anything changes
    tops[b] = scan_block(b, terms.subspan(begin_[b], begin_[b + 1] - begin_[b]), non_finite);
  if (non_finite) {
    record_non_finite(terms, std::span(flags_));
    any_non_finite_ = true;
  }
  for (std::size_t b = 0; b < tops_.size(); ++b) {
    raise_top(b, tops[b]);
    deposit(terms.subspan(begin_[b], begin_[b + 1] - begin_[b]), grid(b), words_.data() + begin_[b],
            words_.data() + elements_ + begin_[b]);
    zero_[b] = 0;
  }
  for (std::int64_t& count : block_terms_) ++count;
  ++words_[2 * elements_];
}

// The window block b needs for `terms` (its part of a term): at least its current one.
// Throws ExactSumError for a double beyond the range; sets non_finite if a term is NaN or Inf.
template <typename T>
int ExactSum::scan_block(std::size_t block, std::span<const T> terms, bool& non_finite) const {
  const ExponentScan scan = scan_exponents(terms);
  const int power = std::max(scan.max_exponent, 1) - Layout<T>::kBias;  // |x| < 2^power
  non_finite |= scan.non_finite;
  return std::max(tops_[block], top_for_power(power));
}

void ExactSum::add(std::span<const float> terms) {
  add_terms(terms);
}

void ExactSum::add_block(std::size_t block, std::span<const float> terms) {
  if (block >= tops_.size() || terms.size() != block_size(block))
    throw ExactSumError("exact sum: " + std::to_string(terms.size()) + " terms for block " +
                        std::to_string(block) + " of " + std::to_string(tops_.size()) +
                        (block < tops_.size()
                             ? " (" + std::to_string(block_size(block)) + " elements)"
                             : std::string()));
  if (block_terms_[block] >= kMaxTerms) throw ExactSumError(terms_text(block_terms_[block], 1));
  bool non_finite = false;
  const int top = scan_block(block, terms, non_finite);
  if (non_finite) {
    record_non_finite(terms, std::span(flags_).subspan(begin_[block], terms.size()));
    any_non_finite_ = true;
  }
  raise_top(block, top);
  deposit(terms, grid(block), words_.data() + begin_[block],
          words_.data() + elements_ + begin_[block]);
  zero_[block] = 0;
  ++block_terms_[block];
  words_[2 * elements_] = std::max(words_[2 * elements_], block_terms_[block]);
}
void ExactSum::add(std::span<const double> terms) {
  add_terms(terms);
}

void ExactSum::merge(const ExactSum& other) {
  if (other.begin_ != begin_)
    throw ExactSumError("exact sum: merging " + std::to_string(other.elements_) + " elements in " +
                        std::to_string(other.tops_.size()) + " blocks into " +
                        std::to_string(elements_) + " in " + std::to_string(tops_.size()) +
                        "; the blocks must be the same");
  if (terms() > kMaxTerms - other.terms()) throw ExactSumError(terms_text(terms(), other.terms()));
  const std::size_t M = elements_;
  for (std::size_t b = 0; b < tops_.size(); ++b) {
    raise_top(b, std::max(tops_[b], other.tops_[b]));
    const int shift = tops_[b] - other.tops_[b];  // other's bins, read as if raised
    const std::size_t begin = begin_[b], end = begin_[b + 1];
    if (shift == 0) {
      for (std::size_t i = begin; i < end; ++i) words_[i] += other.words_[i];
      for (std::size_t i = M + begin; i < M + end; ++i) words_[i] += other.words_[i];
    } else if (shift == 1) {
      for (std::size_t i = begin; i < end; ++i) words_[M + i] += other.words_[i];
    }
  }
  for (std::size_t b = 0; b < tops_.size(); ++b) {
    block_terms_[b] += other.block_terms_[b];
    zero_[b] = zero_[b] && other.zero_[b];
  }
  // the most terms any block holds (no blocks: the counts simply add)
  words_[2 * M] = block_terms_.empty()
                      ? words_[2 * M] + other.words_[2 * M]
                      : *std::max_element(block_terms_.begin(), block_terms_.end());
  if (other.any_non_finite_) {
    for (std::size_t i = 0; i < M; ++i) flags_[i] |= other.flags_[i];
    any_non_finite_ = true;
  }
}

void ExactSum::to_float(std::span<float> out) const {
  if (out.size() != elements_)
    throw ExactSumError("exact sum: " + std::to_string(out.size()) + " outputs for " +
                        std::to_string(elements_) + " elements");
  const std::span<const std::int64_t> words(words_);
  round_range(0, words.first(elements_), words.subspan(elements_, elements_), out);
}

void ExactSum::to_double(std::span<double> out) const {
  if (out.size() != elements_)
    throw ExactSumError("exact sum: " + std::to_string(out.size()) + " outputs for " +
                        std::to_string(elements_) + " elements");
  const std::int64_t* hi = words_.data();
  const std::int64_t* lo = words_.data() + elements_;
  for (std::size_t b = 0; b < tops_.size(); ++b) {
    const double lo_scale = std::ldexp(1.0, grid(b));
    const double hi_scale = std::ldexp(1.0, grid(b) + kBinBits);
    for (std::size_t i = begin_[b]; i < begin_[b + 1]; ++i)  // two exact doubles, one rounding
      out[i] = word_to_double(hi[i]) * hi_scale + word_to_double(lo[i]) * lo_scale;
  }
  if (!any_non_finite_) return;
  for (std::size_t i = 0; i < elements_; ++i)
    if (flags_[i] != 0) out[i] = double(non_finite_result(flags_[i]));
}

void ExactSum::round_range(std::size_t first, std::span<const std::int64_t> hi,
                           std::span<const std::int64_t> lo, std::span<float> out) const {
  const std::size_t last = first + out.size();
  if (hi.size() != out.size() || lo.size() != out.size() || last > elements_)
    throw ExactSumError("exact sum: elements [" + std::to_string(first) + ", " +
                        std::to_string(last) + ") of " + std::to_string(elements_) +
                        " with words for " + std::to_string(hi.size()));
  for (std::size_t b = 0; b < tops_.size(); ++b) {  // the part of block b in [first, last)
    const std::size_t begin = std::max(begin_[b], first), end = std::min(begin_[b + 1], last);
    if (begin >= end) continue;
    const double lo_scale = std::ldexp(1.0, grid(b));
    const double hi_scale = std::ldexp(1.0, grid(b) + kBinBits);
    round_words(hi.data() + (begin - first), lo.data() + (begin - first), hi_scale, lo_scale,
                out.subspan(begin - first, end - begin));
  }
  if (!any_non_finite_) return;
  for (std::size_t i = first; i < last; ++i)
    if (flags_[i] != 0) out[i - first] = non_finite_result(flags_[i]);
}

namespace {

// Ranks agree on every block's window, on whether any rank saw a non-finite term, and that
// every rank passes the same blocks: a small all-gather of the block count, then a small max
// over 3 doubles per block (window, size, −size) and the non-finite flag.
// `outputs`: the length of the caller's output span (the reduce-scatter variant), checked
// here so that a wrong one on a single rank throws on every rank instead of hanging the rest.
void agree_windows(const Communicator& comm, ExactSum& sum, std::size_t outputs) {
  const std::size_t B = sum.blocks();
  check_same_size(comm, B, "allreduce_exact (number of blocks)");
  std::vector<double> facts(3 * B + 2);
  for (std::size_t b = 0; b < B; ++b) {
    const auto M = static_cast<double>(sum.block_size(b));
    facts[3 * b] = sum.top(b);
    facts[3 * b + 1] = M;
    facts[3 * b + 2] = -M;
  }
  facts[3 * B] = sum.any_non_finite() ? 1 : 0;
  facts[3 * B + 1] = outputs != sum.size() ? 1 : 0;
  allreduce_max(comm, facts);
  if (facts[3 * B + 1] != 0)
    throw ExactSumError("allreduce_exact: an output span does not match the " +
                        std::to_string(sum.size()) + " elements on some rank");
  for (std::size_t b = 0; b < B; ++b)
    if (facts[3 * b + 1] != -facts[3 * b + 2])
      throw ExactSumError("allreduce_exact: block " + std::to_string(b) + " has between " +
                          std::to_string(static_cast<std::int64_t>(-facts[3 * b + 2])) + " and " +
                          std::to_string(static_cast<std::int64_t>(facts[3 * b + 1])) +
                          " elements on different ranks; every rank must pass the same blocks");
  if (2 * sum.size() + 1 > static_cast<std::size_t>(INT_MAX))
    throw ExactSumError("allreduce_exact: " + std::to_string(sum.size()) +
                        " elements are too many for one call");
  for (std::size_t b = 0; b < B; ++b) sum.raise_top(b, static_cast<int>(facts[3 * b]));
  sum.set_non_finite(facts[3 * B] != 0);
}

}  // namespace

void allreduce_exact(const Communicator& comm, ExactSum& sum) {
  agree_windows(comm, sum, sum.size());
  if (comm.size() == 1) return;
  std::span<std::int64_t> words = sum.words();
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, words.data(), static_cast<int>(words.size()), MPI_INT64_T,
                          MPI_SUM, comm.handle()),
            "MPI_Allreduce(exact words)");
  // A word wraps only beyond 2^24 terms (2^39 per slice), which this check refuses; the total
  // is the same on every rank, so every rank throws here or none does.
  if (sum.terms() > ExactSum::kMaxTerms)
    throw ExactSumError("allreduce_exact: " + std::to_string(sum.terms()) + " terms over " +
                        std::to_string(comm.size()) + " ranks, more than the " +
                        std::to_string(ExactSum::kMaxTerms) + " a block holds exactly");
  if (!sum.any_non_finite()) return;
  std::span<std::uint8_t> flags = sum.flags();
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, flags.data(), static_cast<int>(flags.size()), MPI_UINT8_T,
                          MPI_BOR, comm.handle()),
            "MPI_Allreduce(exact flags)");
}

void allreduce_exact(const Communicator& comm, ExactSum& sum, std::span<float> out) {
  std::vector<double> total{static_cast<double>(sum.terms())};
  allreduce_sum(comm, std::span(total));  // exact: integers below 2^53
  agree_windows(comm, sum, out.size());
  if (total[0] > static_cast<double>(ExactSum::kMaxTerms))
    throw ExactSumError("allreduce_exact: " + std::to_string(static_cast<std::int64_t>(total[0])) +
                        " terms over " + std::to_string(comm.size()) + " ranks, more than the " +
                        std::to_string(ExactSum::kMaxTerms) + " an accumulator holds exactly");
  if (comm.size() == 1) return sum.to_float(out);
  const std::size_t M = sum.size();
  if (sum.any_non_finite())
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, sum.flags().data(), static_cast<int>(M), MPI_UINT8_T,
                            MPI_BOR, comm.handle()),
              "MPI_Allreduce(exact flags)");
  std::vector<int> counts, begins;
  chunk_table(M, comm.size(), counts, begins);
  const auto mine = static_cast<std::size_t>(comm.rank());
  const auto chunk = static_cast<std::size_t>(counts[mine]);
  const auto first = static_cast<std::size_t>(begins[mine]);
  // In place: each bin's summed chunk lands at the start of that bin's words (MPI_IN_PLACE),
  // so nothing is allocated; the rank's own words are spent.
  std::span<std::int64_t> words = sum.words();
  check_mpi(MPI_Reduce_scatter(MPI_IN_PLACE, words.data(), counts.data(), MPI_INT64_T, MPI_SUM,
                               comm.handle()),
            "MPI_Reduce_scatter(exact words)");
  check_mpi(MPI_Reduce_scatter(MPI_IN_PLACE, words.data() + M, counts.data(), MPI_INT64_T, MPI_SUM,
                               comm.handle()),
            "MPI_Reduce_scatter(exact words)");
  sum.round_range(first, words.first(chunk), words.subspan(M, chunk), out.subspan(first, chunk));
  // The ring's all-gather (ring.hpp) moves chunk r of rank r, the same chunks as above;
  // MPICH's MPI_Allgatherv measured seconds here at this size (bench/README-exact.md).
  all_gather(comm, out);
}

}  // namespace ringtrain::collectives
