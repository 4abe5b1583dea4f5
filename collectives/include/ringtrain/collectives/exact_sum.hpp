// Exact sums of float32 arrays: the same bits whatever the order, the grouping of the additions
// and the split of the terms over ranks.
//
// Where it sits: with `--reduction exact` a step sums, per parameter element, one float32
// partial per micro-batch (dW, bias, BatchNorm statistics, the loss). Float addition is not
// associative, so the ring's order and the split of the batch over ranks change the last bits.
// Here every partial is rounded once, onto a grid that depends only on the largest term of the
// whole sum, into integer words; integer addition is associative, so any order, grouping or
// split gives the same words, and the words are converted back to float32 once.
//
// Vocabulary
//   term     one float32 (or double) added to an element (a micro-batch partial); add()
//            adds one term to every element of the accumulator
//   block    elements of an ExactSum that share one window (the step uses one per tensor)
//   bin k    an int64 word per element counting multiples of 2^lsb(k), lsb(k) = 40·k − 160;
//            bins lie at fixed positions, the same on every rank, for every input
//   window   the two bins (top, top−1) a block keeps; top is the smallest k >= 1 with
//            2^e <= 2^(lsb(k+1)−1), where |x| < 2^e follows from the largest exponent field
//            among the block's terms, so every term rounds to zero in bin k+1; the grid is
//            g = lsb(top−1), so 2^g <= max|x| · 2^-39 (39 or more bits below the max's
//            leading bit: a term's rounding error is at most max|x| · 2^-40)
//   slice    the part of a term in bin k: round_k(x) − round_(k+1)(x), round_k = round to
//            nearest (ties to even) onto multiples of 2^lsb(k). A slice depends on x and k
//            alone, never on the window, so raising a window (a larger term arrived, or the
//            ranks agreed on a higher top) is dropping its lower bin: the words are then those
//            every term would have given had it been converted with the higher window.
//
// The choice: binned fixed point with a per-block window (ReproBLAS's idea on integers)
// rather than a fixed point whose scale ranks agree on *before* converting. The step converts
// each micro-batch partial as soon as backward produces it, before any rank knows the global
// maximum; agreeing first would mean keeping every partial in float until the end. Here each
// rank converts with its own window and raises it later; the allreduce agrees the window (one
// small max) and only then sums the words.
//
// Worked example, one element, terms 1, 2^-24 and 2^-24. In float32, (1 + 2^-24) + 2^-24 = 1
// (each addition is a tie, rounded to even) but 1 + (2^-24 + 2^-24) = 1 + 2^-23: order matters.
//   the exponent field of 1 (127) gives top = 4: lsb(4) = 0, grid g = lsb(3) = −40
//   1      -> bins (top, top−1) += (1, 0)        round_4(1) = 1, nothing below
//   2^-24  -> (0, 2^16)                           2^-24 = 2^16 · 2^-40; round_4 gives 0
//   2^-24  -> (0, 2^16)
//   words (1, 2^17), in any order -> 1 + 2^17·2^-40 = 1 + 2^-23, exact in float32: the sum.
//   A term 1.5 would give (2, −2^39): round_4(1.5) = 2 (tie to even), the slice below −0.5.
//
// Error bound, one element: n terms x_i, S = Σ x_i exact, u = 2^-24 (float32 unit roundoff),
// X = the largest |term| of the whole block (every element, every rank: it sets the grid):
//   each term is rounded once onto the grid: error <= 2^(g−1) <= X · 2^-40
//   the words hold S_w exactly, |S_w − S| <= n · X · 2^-40
//   result = float32(S_w), correctly rounded: |result − S| <= u·|S| + (1 + u)·n·X·2^-40
//                                                           (+ 2^-150 if the result is subnormal)
//   a plain float32 sum in any order: |ŝ − S| <= (n−1)·u·Σ|x_i| + O(u²), and Σ|x_i| >= X, so
//   for an element holding the block's largest term the accumulated part's bound is
//   2^16·(n−1)/n times smaller; the final u·|S| is the rounding any float32 result carries.
//   Elements much smaller than their block's max keep fewer bits: an element whose terms are
//   near X·2^-k is known to about n·2^-(40−k) of itself, worse than float32 once k > 16.
//
// Overflow cannot happen by construction: a slice is at most 2^39 in magnitude, and an
// accumulator holds at most kMaxTerms = 2^12 terms (a step sums B/m micro-batch partials:
// B <= 65536 at m = 16), so every word stays within 2^51, which the conversion back relies on (it
// turns a word into a double by adding it to the bits of 1.5·2^52). add() and merge() refuse to
// pass the bound, and the allreduce checks the total over ranks; every refusal is an ExactSumError
// naming the counts.
//
// NaN and Inf: a non-finite term contributes no slices; the element remembers it (flags) and
// converts to NaN if any term was NaN or both +Inf and −Inf were added, else to ±Inf: what
// IEEE addition gives in every order. A finite sum beyond float32's range rounds to ±Inf.
//
// Cost: add() reads M floats and updates 2·M int64 words (16 bytes per element, 4x a float);
// the conversion in is branch-free (an exponent pass, then a multiply and two round-by-magic-
// constant steps per element), the conversion back a few double operations per element. The
// loops are compiled for the baseline (SSE2) and for AVX2, chosen at run time; every step is
// exact or correctly rounded, so both give the same bits.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ringtrain/collectives/communicator.hpp"

namespace ringtrain::collectives {

// Raised when a sum would leave the accumulator's exact range, or for misuse (sizes).
class ExactSumError : public CollectiveError {
 public:
  using CollectiveError::CollectiveError;
};

// An accumulator of M elements in blocks (one window each: the step uses a block per tensor,
// so a tensor's small elements are not ruled by another tensor's large ones).
class ExactSum {
 public:
  static constexpr int kBinBits = 40;                 // lsb(k+1) − lsb(k)
  static constexpr int kBinOffset = -160;             // lsb(0): the finest grid, <= 2^-149
  static constexpr int kMinTop = 1;                   // windows (1, 0) .. (kMaxTop, kMaxTop−1)
  static constexpr int kMaxTop = 7;                   // |x| <= 2^159: every float32
  static constexpr std::int64_t kMaxTerms = 1 << 12;  // per accumulator, summed over ranks
  // Element flags of non-finite terms.
  static constexpr std::uint8_t kSawNan = 1, kSawPlusInf = 2, kSawMinusInf = 4;

  // One block of `elements`.
  explicit ExactSum(std::size_t elements = 0);
  // Blocks of these sizes, in order: block b is elements [Σ_{c<b} size_c, ... + size_b).
  explicit ExactSum(std::span<const std::size_t> block_sizes);

  std::size_t size() const { return elements_; }
  std::size_t blocks() const { return tops_.size(); }
  std::size_t block_size(std::size_t block) const { return begin_[block + 1] - begin_[block]; }
  // Back to an empty sum (windows kMinTop, no terms), same blocks.
  void clear();

  // element i += terms[i], for every i. terms.size() must equal size(); throws
  // ExactSumError when the accumulator already holds kMaxTerms terms (nothing is changed).
  void add(std::span<const float> terms);
  // The same for double terms (BatchNorm statistics, the loss: sums kept in double), rounded
  // onto the same grid, so the bound above holds with X over every term. A finite double
  // beyond 2^159 does not fit any window: ExactSumError, nothing is changed.
  void add(std::span<const double> terms);
  // element begin(block) + j += terms[j], for the elements of one block only (a layer adding
  // one tensor's partial: the exact step of models with BatchNorm, exact_step.hpp). The words
  // are those add() gives for a term that is zero outside the block. terms.size() must equal
  // block_size(block); throws ExactSumError, changing nothing, when the block already holds
  // kMaxTerms terms.
  void add_block(std::size_t block, std::span<const float> terms);
  // this += other, exactly (same blocks; the term counts add and are checked as in add()).
  void merge(const ExactSum& other);
  // out[i] <- the sum of element i, rounded to float32 once (out.size() == size()).
  void to_float(std::span<float> out) const;
  // out[i] <- the sum of element i as a double: hi·2^(g+40) + lo·2^g rounded once (both
  // parts are exact doubles), so a function of the words alone (BatchNorm's statistics,
  // which are kept in double). Non-finite elements as in to_float. out.size() == size().
  void to_double(std::span<double> out) const;
  // out[j] <- the sum of element first + j whose words are hi[j], lo[j] (words summed
  // elsewhere, e.g. a rank's chunk after a reduce-scatter), with this sum's windows and flags.
  void round_range(std::size_t first, std::span<const std::int64_t> hi,
                   std::span<const std::int64_t> lo, std::span<float> out) const;

  // A block's window top bin; terms(): the most terms any block holds (every block's count
  // when only add() is used; after allreduce_exact the sum over ranks of each rank's most,
  // a bound on every block's total); whether any term was non-finite.
  int top(std::size_t block = 0) const { return tops_[block]; }
  std::int64_t terms() const { return words_[2 * elements_]; }
  std::int64_t block_terms(std::size_t block) const { return block_terms_[block]; }
  bool any_non_finite() const { return any_non_finite_; }
  // Raises a block's window to `top` (>= top(block), <= kMaxTop): drops bins below it.
  void raise_top(std::size_t block, int top);

  // For the allreduce: (2·M + 1) int64: bin top (M), bin top−1 (M), then the term count.
  std::span<std::int64_t> words() {
    std::fill(zero_.begin(), zero_.end(), char{0});  // the caller may write any words
    return words_;
  }
  std::span<std::uint8_t> flags() { return flags_; }
  void set_non_finite(bool any) { any_non_finite_ = any; }

 private:
  template <typename T>
  void add_terms(std::span<const T> terms);
  template <typename T>
  int scan_block(std::size_t block, std::span<const T> terms, bool& non_finite) const;
  int grid(std::size_t block) const { return kBinOffset + kBinBits * (tops_[block] - 1); }

  std::size_t elements_ = 0;
  std::vector<std::size_t> begin_;         // (blocks + 1): first element of each block, then M
  std::vector<int> tops_;                  // (blocks): each block's window
  std::vector<std::int64_t> words_;        // (2·M + 1): hi bins, lo bins, term count
  std::vector<std::uint8_t> flags_;        // (M): kSaw* of non-finite terms
  std::vector<std::int64_t> block_terms_;  // (blocks): terms added here (add, add_block, merge)
  std::vector<char> zero_;                 // (blocks): every word is known to be 0 (raise_top
                                           // then has nothing to move)
  bool any_non_finite_ = false;
};

// sum <- the sum over ranks of every rank's sum, then any rank's to_float gives the same
// bits. Collective: every rank passes an accumulator with the same blocks (checked: every
// rank throws the same ExactSumError, before any word moves).
// Cost: the agreement, small all-gathers (small.hpp: the number of blocks, then 3 doubles per
// block: window, size, −size, plus one non-finite flag, whose max is taken); then one
// MPI_Allreduce(MPI_INT64_T, MPI_SUM) of 2·M + 1 words (16 bytes per element, 4x the floats'
// ring), and only when some rank saw a non-finite term, one MPI_BOR of M bytes. Throws
// ExactSumError on every rank when the term count summed over ranks exceeds kMaxTerms.
void allreduce_exact(const Communicator& comm, ExactSum& sum);

// out <- the float32 of the sum over ranks, the same bits on every rank and as
// allreduce_exact then to_float, for less traffic: the words are reduce-scattered (rank r sums
// chunk r, schedule.hpp), each rank rounds only its chunk, and the floats are all-gathered
// by the ring (ring.hpp). On a ring that is (N−1)/N · (16 + 4) bytes per element instead of
// (N−1)/N · 32, and 1/N of the rounding (bench/README-exact.md has its measured cost).
// `sum` is consumed: its words are unspecified afterwards (its windows and flags are the
// agreed ones); clear() it before the next sum. Collective; the agreement first (as above,
// plus a small sum of the term counts), so a count beyond kMaxTerms, unequal blocks or an
// `out` whose length is not size() on any rank throw on every rank before any word moves.
void allreduce_exact(const Communicator& comm, ExactSum& sum, std::span<float> out);

}  // namespace ringtrain::collectives
