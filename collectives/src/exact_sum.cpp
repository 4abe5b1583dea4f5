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

#include "ringtrain/collectives/small.hpp"

namespace ringtrain::collectives {

namespace {

// Round-to-nearest-even of a double d with |d| <= 2^51: d + 1.5·2^52 lands in [2^52, 2^53),
// where doubles are the integers, so the addition rounds d and the low bits hold it.
constexpr double kMagic = 0x1.8p52;
const std::int64_t kMagicBits = std::bit_cast<std::int64_t>(kMagic);
constexpr double kBin = 0x1p40, kInvBin = 0x1p-40;  // 2^kBinBits and its inverse
static_assert(ExactSum::kBinBits == 40, "kBin and kInvBin are 2^±kBinBits");

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

// The sum of an element that saw non-finite terms, as IEEE addition gives it in any order.
float non_finite_result(std::uint8_t flags) {
  const bool plus = flags & ExactSum::kSawPlusInf, minus = flags & ExactSum::kSawMinusInf;
  if ((flags & ExactSum::kSawNan) || (plus && minus))
    return std::numeric_limits<float>::quiet_NaN();
  return plus ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
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

std::string terms_text(std::int64_t held, std::int64_t more) {
  return "exact sum: " + std::to_string(held) + " terms plus " + std::to_string(more) +
         " exceed the " + std::to_string(ExactSum::kMaxTerms) +
         " a block holds exactly; sum fewer terms per block (a larger micro-batch)";
}

}  // namespace

ExactSum::ExactSum(std::size_t elements)
    : elements_(elements), words_(2 * elements + 1, 0), flags_(elements, 0) {}

void ExactSum::clear() {
  std::fill(words_.begin(), words_.end(), 0);
  std::fill(flags_.begin(), flags_.end(), 0);
  top_ = kMinTop;
  any_non_finite_ = false;
}

void ExactSum::raise_top(int top) {
  if (top < top_ || top > kMaxTop)
    throw ExactSumError("exact sum: window " + std::to_string(top) + " is not in [" +
                        std::to_string(top_) + ", " + std::to_string(kMaxTop) + "]");
  const int shift = top - top_;
  if (shift == 0) return;
  const auto M = static_cast<std::ptrdiff_t>(elements_);
  auto hi = words_.begin(), lo = words_.begin() + M;
  if (shift == 1)
    std::copy(hi, hi + M, lo);  // the old top bin is the new lower bin
  else
    std::fill(lo, lo + M, 0);
  std::fill(hi, hi + M, 0);
  top_ = top;
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

// The largest exponent field among the finite terms, and whether any term is non-finite.
struct ExponentScan {
  int max_exponent = 0;
  bool non_finite = false;
};

template <typename T>
[[gnu::always_inline]] inline ExponentScan scan_loop(std::span<const T> terms) {
  int max_exponent = 0, special = 0;  // signed ints: SSE2 vectorises their max, not unsigned
  for (std::size_t i = 0; i < terms.size(); ++i) {
    const int e = exponent_field(terms[i]);
    special |= e == Layout<T>::kMask;
    max_exponent = std::max(max_exponent, e == Layout<T>::kMask ? 0 : e);
  }
  return {max_exponent, special != 0};
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

bool has_avx2() {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2;
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

template <typename T>
void ExactSum::add_terms(std::span<const T> terms) {
  if (terms.size() != elements_)
    throw ExactSumError("exact sum: " + std::to_string(terms.size()) + " terms for " +
                        std::to_string(elements_) + " elements");
  if (this->terms() >= kMaxTerms) throw ExactSumError(terms_text(this->terms(), 1));
  const ExponentScan scan = scan_exponents(terms);
  const int power = std::max(scan.max_exponent, 1) - Layout<T>::kBias;  // |x| < 2^power
  raise_top(std::max(top_, top_for_power(power)));  // throws before anything changes
  if (scan.non_finite) {
    for (std::size_t i = 0; i < elements_; ++i) {
      const T x = terms[i];
      if (std::isnan(x))
        flags_[i] |= kSawNan;
      else if (std::isinf(x))
        flags_[i] |= x > 0 ? kSawPlusInf : kSawMinusInf;
    }
    any_non_finite_ = true;
  }
  deposit(terms, kBinOffset + kBinBits * (top_ - 1), words_.data(), words_.data() + elements_);
  ++words_[2 * elements_];
}

void ExactSum::add(std::span<const float> terms) {
  add_terms(terms);
}
void ExactSum::add(std::span<const double> terms) {
  add_terms(terms);
}

void ExactSum::merge(const ExactSum& other) {
  if (other.elements_ != elements_)
    throw ExactSumError("exact sum: merging " + std::to_string(other.elements_) +
                        " elements into " + std::to_string(elements_));
  if (terms() > kMaxTerms - other.terms()) throw ExactSumError(terms_text(terms(), other.terms()));
  raise_top(std::max(top_, other.top_));
  const int shift = top_ - other.top_;  // other's bins, read as if raised to this window
  const std::size_t M = elements_;
  if (shift == 0)
    for (std::size_t i = 0; i < 2 * M; ++i) words_[i] += other.words_[i];
  else if (shift == 1)
    for (std::size_t i = 0; i < M; ++i) words_[M + i] += other.words_[i];
  words_[2 * M] += other.words_[2 * M];
  if (other.any_non_finite_) {
    for (std::size_t i = 0; i < M; ++i) flags_[i] |= other.flags_[i];
    any_non_finite_ = true;
  }
}

void ExactSum::to_float(std::span<float> out) const {
  if (out.size() != elements_)
    throw ExactSumError("exact sum: " + std::to_string(out.size()) + " outputs for " +
                        std::to_string(elements_) + " elements");
  const int grid = kBinOffset + kBinBits * (top_ - 1);
  const double lo_scale = std::ldexp(1.0, grid), hi_scale = std::ldexp(1.0, grid + kBinBits);
  round_words(words_.data(), words_.data() + elements_, hi_scale, lo_scale, out);
  if (!any_non_finite_) return;
  for (std::size_t i = 0; i < elements_; ++i)
    if (flags_[i] != 0) out[i] = non_finite_result(flags_[i]);
}

namespace {

// Ranks agree on each block's window, whether any rank saw a non-finite term in it, and that
// every rank passes the same sizes: one small max over 4 doubles per block.
void agree_windows(const Communicator& comm, std::span<ExactSum> blocks) {
  check_same_size(comm, blocks.size(), "allreduce_exact (number of blocks)");
  std::vector<double> facts(4 * blocks.size());
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    const auto M = static_cast<double>(blocks[b].size());
    facts[4 * b] = blocks[b].top();
    facts[4 * b + 1] = blocks[b].any_non_finite() ? 1 : 0;
    facts[4 * b + 2] = M;
    facts[4 * b + 3] = -M;
  }
  allreduce_max(comm, facts);
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    if (facts[4 * b + 2] != -facts[4 * b + 3])
      throw ExactSumError("allreduce_exact: block " + std::to_string(b) + " has between " +
                          std::to_string(static_cast<std::int64_t>(-facts[4 * b + 3])) + " and " +
                          std::to_string(static_cast<std::int64_t>(facts[4 * b + 2])) +
                          " elements on different ranks; every rank must pass the same sizes");
    if (2 * blocks[b].size() + 1 > static_cast<std::size_t>(INT_MAX))
      throw ExactSumError("allreduce_exact: block " + std::to_string(b) + " of " +
                          std::to_string(blocks[b].size()) + " elements is too large for one call");
    blocks[b].raise_top(static_cast<int>(facts[4 * b]));
    blocks[b].set_non_finite(facts[4 * b + 1] != 0);
  }
}

}  // namespace

void allreduce_exact(const Communicator& comm, std::span<ExactSum> blocks) {
  agree_windows(comm, blocks);
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    ExactSum& block = blocks[b];
    std::span<std::int64_t> words = block.words();
    if (comm.size() > 1)
      check_mpi(MPI_Allreduce(MPI_IN_PLACE, words.data(), static_cast<int>(words.size()),
                              MPI_INT64_T, MPI_SUM, comm.handle()),
                "MPI_Allreduce(exact words)");
    // A word wraps only beyond 2^24 terms (2^39 per slice), which this check refuses; the
    // total is the same on every rank, so every rank throws here or none does.
    if (block.terms() > ExactSum::kMaxTerms)
      throw ExactSumError("allreduce_exact: block " + std::to_string(b) + " sums " +
                          std::to_string(block.terms()) + " terms over " +
                          std::to_string(comm.size()) + " ranks, more than the " +
                          std::to_string(ExactSum::kMaxTerms) + " it holds exactly");
    if (!block.any_non_finite() || comm.size() == 1) continue;
    std::span<std::uint8_t> flags = block.flags();
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, flags.data(), static_cast<int>(flags.size()), MPI_UINT8_T,
                            MPI_BOR, comm.handle()),
              "MPI_Allreduce(exact flags)");
  }
}

}  // namespace ringtrain::collectives
