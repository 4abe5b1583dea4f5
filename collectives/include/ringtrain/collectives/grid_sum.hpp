// Exact sums of float32 terms on a grid that every rank agrees on before any term is
// converted: one int64 word per element, where ExactSum (exact_sum.hpp) needs two.
//
// Where it sits: the gradient of `--reduction exact` (framework/train/exact_step.hpp) sums one
// float32 partial per micro-batch for every parameter element, over micro-batches and ranks.
// ExactSum converts each term as it arrives, before any rank knows the largest one, so it
// keeps a window that can still rise: two 40-bit bins per element, 16 bytes per element to
// sum over ranks. Here the terms are kept as floats until the sum; the ranks then agree on
// each block's largest exponent (one small max), and every term is rounded once onto the grid
// that exponent fixes. One word per element holds the integer sum exactly: 8 bytes per
// element on the wire. The price is memory: the terms themselves until the sum. The step
// avoids it by fixing each block's grid from a bound before its terms come ("Fixed grids"
// below): then nothing is kept.
//
// Vocabulary
//   term    one float32 per element of a block (a micro-batch's partial), kept as given
//   block   elements that share one grid (the step uses one per parameter tensor, so a
//           tensor's small elements are not ruled by another tensor's large ones)
//   power   E, the smallest e with |x| < 2^e for every finite term of the block on every
//           rank: from the largest exponent field F, E = max(F, 1) − 126 (zeros and
//           subnormals count as F = 1), agreed by a max over ranks
//   count   n, the block's terms summed over ranks (for the step: the global batch's
//           micro-batches, whatever the split), agreed by a sum; c = ceil(log2 n)
//   grid    g = E − p, p = kWordBits − c = 51 − c bits of precision (39 to 51); a term
//           becomes q(x) = round(x / 2^g), to nearest, ties to even, |q| <= 2^p
//   word    an element's int64 sum W of its terms' q over every term of every rank
//
// The bits: an element's result is float32(W · 2^g), rounded once. W depends on the terms, on
// E and on n; E is a max and n a count over all terms: none of them depends on the order of
// the terms, on which rank holds which term, or on N.
//
// Worked example, one block of one element, terms 1, 2^-24 and 2^-24. In float32
// (1 + 2^-24) + 2^-24 = 1 (each addition a tie, rounded to even) but 1 + (2^-24 + 2^-24) =
// 1 + 2^-23: order matters. Here F = 127 (the field of 1), E = 1, n = 3, c = 2, p = 49,
// g = −48: q(1) = 2^48, q(2^-24) = 2^24, W = 2^48 + 2^25, W · 2^-48 = 1 + 2^-23 in any order.
//
// Error bound, one element of n terms x_i, S = Σ x_i exact, u = 2^-24, X the block's largest
// |term| over every rank (X >= 2^(E−1) when it is normal):
//   each term's rounding <= 2^(g−1) = 2^(E−p−1) <= X · 2^-p
//   |W · 2^g − S| <= n · X · 2^-p = n · X · 2^(c−51)
//   result: |result − S| <= u·|S| + (1 + u)·n·X·2^(c−51)  (+ 2^-150 for a subnormal result)
// (a block of zeros and subnormals only: each rounding <= 2^(−126−p)). A float32 sum of the
// same terms carries up to (n − 1)·u·Σ|x_i|. An element 2^-k smaller than its block's largest
// term keeps about p − k bits, fewer than float32's 24 once k > p − 24. ExactSum keeps 39 to
// 79 bits below its window, depending on where the largest term falls in its top bin.
//
// Fixed grids. A block's power may also be fixed before any term exists, from a bound on the
// terms that every rank agrees on (fix_grid; the exact step derives it from the layer's
// inputs, exact_step.hpp). Each term is then rounded onto the grid as it comes, while it is
// still in cache, and nothing is kept: the words are the block's whole memory. The bits are
// still those of the terms, the power and n alone; the error bound above holds with
// 2^(E − 1) in place of X, so a bound far above the largest term costs precision
// (E − log2 X bits), not exactness. A term at or above 2^E would break the words' limit:
// allreduce_grid refuses the sum on every rank (ExactSumError) rather than return it.
//
// Overflow cannot happen: n words of at most 2^p = 2^(51−c) give |W| <= 2^51, so a word and
// its scaled value are exact doubles and the rounding back is one conversion. A block holds at
// most kMaxTerms = 2^12 terms summed over ranks (p >= 39): add() and add_block() refuse a
// block's 2^12 + 1st term on a rank, and the allreduce checks every block's total over ranks
// before any word moves.
//
// NaN and Inf: a step whose gradient is not finite is skipped, so no element needs the IEEE
// sum of non-finite terms. If any term on any rank is NaN or ±Inf, every element of the result
// is NaN and allreduce_grid returns false on every rank.
//
// Cost, M elements and n terms per rank: n · M floats of memory for the kept terms (ExactSum's
// 16 bytes per element are 4 terms' worth; a borrowed term takes none); per add an exponent
// scan and the copy, in one pass (a term written in place: the scan alone); at the sum two
// small collectives (a max and a sum over a few doubles per block), n conversions (read a
// float, add into the 8-byte word), a ring reduce-scatter of the M int64 words, the rounding
// of this rank's chunk and the ring's all-gather of the floats: (N−1)/N · (8 + 4) bytes per
// element on a ring, against ExactSum's (N−1)/N · (16 + 4). A fixed block costs no kept terms
// and no scan: its n conversions happen at the adds. bench/README-exact.md has the
// measurements.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/collectives/exact_sum.hpp"

namespace ringtrain::collectives {

class GridExchange;  // grid_exchange.hpp
struct GridFacts;    // what the ranks agree on before the words are rounded (grid_sum.cpp)

// A sum of M elements in blocks, kept as float32 terms until allreduce_grid.
class GridSum {
 public:
  static constexpr int kWordBits = 51;                // |W| <= 2^51: exact as a double
  static constexpr std::int64_t kMaxTerms = 1 << 12;  // per block, summed over ranks
  // The powers fix_grid takes: every subnormal lies below 2^-126, every finite float below
  // 2^128.
  static constexpr int kMinPower = -126, kMaxPower = 128;
  static constexpr int kNotFixed = -1000;  // the power of a block whose grid is not fixed

  // Blocks of these sizes, in order: block b is elements [Σ_{c<b} size_c, ... + size_b).
  explicit GridSum(std::span<const std::size_t> block_sizes);

  std::size_t size() const { return begin_.back(); }
  std::size_t blocks() const { return kept_.size(); }
  std::size_t block_size(std::size_t block) const { return begin_[block + 1] - begin_[block]; }
  std::int64_t block_terms(std::size_t block) const { return terms_[block]; }

  // Back to no terms (the memory of the kept terms stays allocated for the next sum).
  void clear();
  // One term per element: element i += terms[i] (terms.size() == size()). kCopy keeps a copy;
  // kBorrow keeps only the span: the caller leaves it unchanged until allreduce_grid has run
  // (its `out` may be the same memory: every term is read before out is written).
  enum class Keep { kCopy, kBorrow };
  void add(std::span<const float> terms, Keep keep = Keep::kCopy);
  // One term for the elements of one block only (terms.size() == block_size(block)).
  void add_block(std::size_t block, std::span<const float> terms);
  // One term for one block, written in place instead of copied: next_term(block) gives the
  // floats where the block's next term is kept (block_size(block) of them, contents
  // unspecified); the caller writes all of them, then add_written(block) counts the term.
  // Checked as add_block's term is (ExactSumError); anything else added to the block in
  // between is a caller's error.
  std::span<float> next_term(std::size_t block);
  void add_written(std::size_t block);
  // As if a term had been NaN: the sum over ranks is then not finite on every rank.
  void mark_non_finite() { non_finite_ = true; }

  // A grid fixed before the terms ("Fixed grids" above): from now until clear(), the block's
  // grid is g = power − p(total_terms), and its terms are rounded onto it as they come, into
  // its words, not kept. Every rank passes the same power and total (allreduce_grid checks
  // both); every term of the block on every rank must lie in |x| < 2^power, and the block
  // takes at most total_terms terms over all ranks (both checked by allreduce_grid, which
  // throws ExactSumError on every rank otherwise). Call before the block's first term.
  void fix_grid(std::size_t block, int power, std::int64_t total_terms);
  bool fixed(std::size_t block) const { return fixed_power_[block] != kNotFixed; }
  // The power fix_grid needs for terms |x| <= bound: the smallest E >= kMinPower with
  // bound < 2^E, at most kMaxPower (every finite float lies below 2^128).
  static int power_above(double bound);
  // Elements [offset, offset + length) of this rank's terms first_term, first_term + 1, ...
  // (counted 0, 1, ... on this rank) of a fixed block, rounded onto its grid: `pieces` holds
  // each term's piece of `length` floats, one after another. Term 0 writes the words, later
  // terms add to them. Every term covers the whole block, and each element's piece of term 0
  // comes before its pieces of other terms (terms in pieces let a layer round them while
  // they are in cache; with several terms' pieces at once, each element's word is loaded and
  // stored once for every eight of them). add_block and add_written on a fixed block add
  // a whole term this way.
  void add_pieces(std::size_t block, std::size_t offset, std::size_t length,
                  std::span<const float> pieces, std::int64_t first_term);

 private:
  friend bool allreduce_grid(const Communicator& comm, GridSum& sum, std::span<float> out);
  friend bool reduce_scatter_grid(const Communicator& comm, GridSum& sum, std::span<float> out);
  friend bool round_exchanged_grid(const Communicator& comm, GridSum& sum, GridExchange& exchange,
                                   std::span<float> out);
  friend class GridExchange;  // grid_exchange.hpp: the words summed over ranks range by range
  // Checks before anything changes; ExactSumError names what is wrong.
  void check_block_term(std::size_t block, std::size_t size) const;
  void keep(std::size_t block, std::span<const float> terms, Keep keep);
  // Room for `size` more floats of the block's kept terms, at kept_used_[block].
  float* room(std::size_t block, std::size_t size);
  // Counts one more term of the block, its largest exponent field and whether it held a NaN
  // or an Inf.
  void count(std::size_t block, int max_field, bool non_finite);
  // words_ <- every block's kept terms converted on its grid and summed.
  void convert(std::span<const int> grids);
  // What this rank tells the others before the words are rounded; out_size: the output's.
  GridFacts facts(std::size_t out_size) const;
  // This rank's chunk of out <- its words summed over ranks and rounded (allreduce_grid's
  // first half); false, with out NaN, when the ranks found a term not finite. Collective.
  bool round_own_chunk(const Communicator& comm, std::span<float> out);
  // out[from, from + count) <- the words there rounded once, each block's on its grid.
  void round_into(std::span<const int> grids, std::size_t from, std::size_t count,
                  std::span<float> out) const;

  std::vector<std::size_t> begin_;        // (blocks + 1): first element of each block, then M
  std::vector<std::vector<float>> kept_;  // per block: its copied terms, one after another
  std::vector<std::size_t> kept_used_;    // per block: the floats of kept_ in use (the rest
                                          // stays allocated from earlier sums)
  std::vector<std::vector<const float*>> borrowed_;  // per block: its borrowed terms
  std::vector<std::int64_t> terms_;                  // per block: the number of terms kept
  std::vector<int> max_field_;                       // per block: the largest exponent field so far
  std::vector<std::int64_t> words_;                  // (M): the words while summing
  std::vector<std::int64_t> scratch_words_;          // the reduce-scatter's received segments
  std::vector<int> fixed_power_;                     // per block: its fixed power E, or kNotFixed
  std::vector<std::int64_t> fixed_terms_;            // per block: its fixed total of terms
  std::vector<float> scratch_;  // next_term of a fixed block: one term, rounded at add_written
  bool non_finite_ = false;
  bool out_of_bound_ = false;  // a term of a fixed block reached 2^power
};

// out <- the sum over ranks of every rank's terms, rounded to float32 once: the same bits on
// every rank, for any order of the terms and any split of them over ranks. Returns false when
// some term on some rank was not finite (every element of out is then NaN), true otherwise.
// Collective: every rank passes the same blocks and an out of size() floats (checked: every
// rank throws the same ExactSumError before any word moves, as for a block whose terms summed
// over ranks exceed kMaxTerms, or for a fixed block: grids that differ between ranks, more
// terms than fixed, a term at or above its bound). Each rank sums its chunk of the words on
// a ring and rounds it (schedule.hpp); the ring (ring.hpp) all-gathers the floats. `sum`
// keeps its terms.
bool allreduce_grid(const Communicator& comm, GridSum& sum, std::span<float> out);

// allreduce_grid without its all-gather: only this rank's chunk of out (schedule.hpp: chunk
// `rank` of size() elements, the part the ring's reduce-scatter leaves it, as
// reduce_scatter_shard in async.hpp gives for one bucket) receives the rounded sum, with
// allreduce_grid's bits there; the rest of out is left as it was. For a rank that needs only
// its own part of the sum (ZeRO-1's update of its shard). Returns true on every rank when
// every element of the whole sum is finite: false for a non-finite term (as allreduce_grid;
// the chunk is then NaN) and also for a sum that rounds to Inf in any rank's chunk (one small
// allreduce agrees on it). Collective, checked as allreduce_grid.
bool reduce_scatter_grid(const Communicator& comm, GridSum& sum, std::span<float> out);

}  // namespace ringtrain::collectives
