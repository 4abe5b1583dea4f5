// Exact sums on an agreed grid (see grid_sum.hpp): float32 terms kept until the sum, each
// rounded once onto its block's grid into one int64 word per element, the words summed over
// ranks, one rounding back to float32.
#include "ringtrain/collectives/grid_sum.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "exact_words.hpp"
#include "grid_words.hpp"
#include "ringtrain/collectives/grid_exchange.hpp"
#include "ringtrain/collectives/ring.hpp"
#include "ringtrain/collectives/small.hpp"

namespace ringtrain::collectives {

namespace {

using exact_words::ExponentScan;
using exact_words::has_avx2;
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

// The conversions' copy for this CPU (grid_words.hpp: portable, AVX2, AVX-512; the same bits).
grid_words::Isa words_isa() {
  return grid_words::widest();
}

// words[i] (+)= Σ_t round(x_t[i] · scale) for a fixed block's `count` terms, whose pieces lie
// `stride` floats apart (x_t = x + t · stride); `first`: the words hold nothing yet. Also checks
// |x| < limit (2^E, or +Inf for E = 128) on the way: returns false if some x is not below it
// (a NaN included), and add_pieces then looks closer.
bool add_terms_on_grid(const float* x, std::size_t stride, std::size_t count, std::size_t n,
                       double scale, float limit, bool first, std::int64_t* words) {
  return grid_words::add_terms(words_isa(), x, stride, count, n, scale, limit, first, words);
}

// words[i] (+)= round(x_i · scale) for one kept term (no bound to check).
void add_on_grid(const float* x, std::size_t n, double scale, bool first, std::int64_t* words) {
  grid_words::add_terms(words_isa(), x, n, 1, n, scale, std::numeric_limits<float>::infinity(),
                        first, words);
}

// out[i] <- float32(words[i] · 2^g), rounded once: |words[i]| <= 2^51, so the word and its
// scaled value are exact doubles (no double reaches the range's ends: |g| <= 190), and the
// conversion to float32 is the only rounding, subnormal and overflowing results included.
void round_words(const std::int64_t* words, std::size_t n, int grid, float* out) {
  grid_words::round(words_isa(), words, n, grid, out);
}

// The exponent scans, compiled for AVX2 as well (their results are integers: any copy agrees).
[[gnu::target("avx2")]] ExponentScan scan_avx2(std::span<const float> terms) {
  return exact_words::scan_loop(terms);
}
[[gnu::target("avx2")]] ExponentScan copy_scan_avx2(std::span<const float> terms, float* to) {
  return exact_words::scan_loop<float, true>(terms, to);
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
      max_field_(block_sizes.size(), 0),
      fixed_power_(block_sizes.size(), kNotFixed),
      fixed_terms_(block_sizes.size(), 0) {
  for (std::size_t size : block_sizes) begin_.push_back(begin_.back() + size);
  words_.resize(size());
}

void GridSum::clear() {
  std::fill(kept_used_.begin(), kept_used_.end(), 0);
  for (std::vector<const float*>& borrowed : borrowed_) borrowed.clear();
  std::fill(terms_.begin(), terms_.end(), 0);
  std::fill(max_field_.begin(), max_field_.end(), 0);
  std::fill(fixed_power_.begin(), fixed_power_.end(), kNotFixed);
  std::fill(fixed_terms_.begin(), fixed_terms_.end(), 0);
  non_finite_ = false;
  out_of_bound_ = false;
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
  if (fixed(block)) return add_pieces(block, 0, terms.size(), terms, terms_[block]);
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
  if (fixed(block)) {
    scratch_.resize(std::max(scratch_.size(), block_size(block)));
    return {scratch_.data(), block_size(block)};
  }
  return {room(block, block_size(block)), block_size(block)};
}

void GridSum::add_written(std::size_t block) {
  check_block_term(block, block < blocks() ? block_size(block) : 0);
  const std::size_t n = block_size(block);
  if (fixed(block)) {
    if (scratch_.size() < n)
      throw ExactSumError("grid sum: add_written(" + std::to_string(block) +
                          ") without next_term for it");
    return add_pieces(block, 0, n, {scratch_.data(), n}, terms_[block]);
  }
  if (kept_[block].size() < kept_used_[block] + n)
    throw ExactSumError("grid sum: add_written(" + std::to_string(block) +
                        ") without next_term for it");
  const ExponentScan found = scan({kept_[block].data() + kept_used_[block], n}, nullptr);
  kept_used_[block] += n;
  count(block, found.max_exponent, found.non_finite);
}

int GridSum::power_above(double bound) {
  if (!(bound < std::ldexp(1.0, kMaxPower))) return kMaxPower;  // NaN and Inf too
  int e = 0;
  std::frexp(bound, &e);  // bound = f · 2^e, f in [0.5, 1): 2^(e−1) <= bound < 2^e
  return bound <= 0.0 ? kMinPower : std::max(e, kMinPower);
}

void GridSum::fix_grid(std::size_t block, int power, std::int64_t total_terms) {
  const std::string which = "grid sum: fix_grid(" + std::to_string(block) + ", ";
  if (block >= blocks())
    throw ExactSumError(which + "...) of " + std::to_string(blocks()) + " blocks");
  if (power < kMinPower || power > kMaxPower || total_terms < 0 || total_terms > kMaxTerms)
    throw ExactSumError(which + std::to_string(power) + ", " + std::to_string(total_terms) +
                        "): the power must lie in [" + std::to_string(kMinPower) + ", " +
                        std::to_string(kMaxPower) + "], the terms in [0, " +
                        std::to_string(kMaxTerms) + "]");
  if (terms_[block] != 0) throw ExactSumError(which + "...) after the block's first term");
  fixed_power_[block] = power;
  fixed_terms_[block] = total_terms;
}

void GridSum::add_pieces(std::size_t block, std::size_t offset, std::size_t length,
                         std::span<const float> pieces, std::int64_t first_term) {
  if (block >= blocks() || !fixed(block))
    throw ExactSumError("grid sum: add_pieces on block " + std::to_string(block) +
                        ", which is not a fixed block");
  if (offset > block_size(block) || length > block_size(block) - offset ||
      (length == 0 ? !pieces.empty() : pieces.size() % length != 0))
    throw ExactSumError("grid sum: " + std::to_string(pieces.size()) + " floats in pieces of " +
                        std::to_string(length) + " at " + std::to_string(offset) +
                        " do not lie in block " + std::to_string(block) + " (" +
                        std::to_string(block_size(block)) + ")");
  if (length == 0) return;
  const auto count = static_cast<std::int64_t>(pieces.size() / length);
  if (first_term < 0 || first_term + count > kMaxTerms)
    throw ExactSumError("grid sum: terms " + std::to_string(first_term) + " to " +
                        std::to_string(first_term + count - 1) + " of block " +
                        std::to_string(block) + "; a block sums at most " +
                        std::to_string(kMaxTerms) + " terms exactly");
  const int power = fixed_power_[block];
  const double scale = std::ldexp(1.0, -(power - precision_of(fixed_terms_[block])));
  const float limit =
      power == kMaxPower ? std::numeric_limits<float>::infinity() : std::ldexp(1.0f, power);
  // At most kGroup terms at a time: the pieces often lie a power of 2 apart, and more streams
  // than L1 has ways would evict each other. More terms than that take several passes over
  // the words, in runs of 32 KiB of words that stay in cache between the passes.
  constexpr std::size_t kRun = 4096, kGroup = 8;
  const auto terms = static_cast<std::size_t>(count);
  std::int64_t* words = words_.data() + begin_[block] + offset;
  bool inside = true;
  for (std::size_t first = 0; first < length; first += kRun) {
    const std::size_t run = std::min(kRun, length - first);
    for (std::size_t t = 0; t < terms; t += kGroup)
      inside &=
          add_terms_on_grid(pieces.data() + t * length + first, length, std::min(kGroup, terms - t),
                            run, scale, limit, first_term == 0 && t == 0, words + first);
  }
  if (!inside) {  // a NaN or an Inf, or a finite term at or above 2^E (the bound was wrong)
    const ExponentScan found = scan(pieces, nullptr);
    non_finite_ |= found.non_finite;
    // |x| >= 2^E for some x of exponent field F >= 1 exactly when F − 127 >= E (subnormals
    // and zeros lie below 2^kMinPower).
    out_of_bound_ |= found.max_exponent >= power + 127;
  }
  terms_[block] = std::max(terms_[block], first_term + count);
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
    if (fixed(b)) continue;  // its terms are in its words already
    const double scale = std::ldexp(1.0, -grids[b]);
    terms = borrowed_[b];
    for (std::size_t at = 0; at < kept_used_[b]; at += n) terms.push_back(kept_[b].data() + at);
    for (std::size_t first = 0; first < n; first += kPiece) {
      const std::size_t count = std::min(kPiece, n - first);
      for (std::size_t t = 0; t < terms.size(); ++t) {
        add_on_grid(terms[t] + first, count, scale, t == 0, words + first);
      }
    }
  }
}

// What the ranks agree on before the words are rounded (allreduce_grid: before any word
// moves; round_exchanged_grid: after they moved): per block, its largest exponent field, its
// size, its fixed power and total (or GridSum's kNotFixed and 0), its terms on this rank; and
// whether some term was not finite, some fixed block's term out of its bound, an output of
// the wrong length.
struct GridFacts {
  std::vector<int> fields;
  std::vector<std::size_t> sizes;
  std::vector<int> fixed_powers;
  std::vector<std::int64_t> fixed_terms, terms;
  bool non_finite = false, out_of_bound = false, wrong_out = false;
};

namespace {

// Throws the same ExactSumError on every rank for a block whose facts differ between ranks or
// whose terms exceed what its grid sums exactly; `facts` holds each value's max over ranks
// and then the negated value's (so max == −max(−x) says every rank passed the same x).
void check_block(const Communicator& comm, std::size_t b, std::span<const double> facts,
                 double total, bool fixed) {
  const auto same = [&](std::size_t i) { return facts[i] == -facts[i + 1]; };
  if (!same(1))
    throw ExactSumError("allreduce_grid: block " + std::to_string(b) +
                        " has different sizes on different ranks; every rank must pass the "
                        "same blocks");
  if (!same(3) || !same(5))
    throw ExactSumError("allreduce_grid: block " + std::to_string(b) +
                        " has different fixed grids on different ranks (or is fixed on some "
                        "only); every rank must fix the same power and total");
  const double most = fixed ? facts[5] : static_cast<double>(GridSum::kMaxTerms);
  if (total > most)
    throw ExactSumError("allreduce_grid: block " + std::to_string(b) + " holds " +
                        std::to_string(static_cast<std::int64_t>(total)) + " terms over " +
                        std::to_string(comm.size()) + " ranks, more than the " +
                        std::to_string(static_cast<std::int64_t>(most)) + " it sums exactly");
}

// The ranks agree on every block's grid and that the sum is finite, after checking that every
// rank passes the same blocks (and fixed grids), an out of the right length, at most
// kMaxTerms terms per block in total (a fixed block: at most its total) and no fixed block's
// term outside its bound: a small max and a small sum (the terms per block). Every rank
// throws the same error, or none does. Returns the grids; `finite` whether the sum is.
std::vector<int> agree_grids(const Communicator& comm, const GridFacts& mine, bool& finite) {
  const std::size_t B = mine.fields.size();
  constexpr std::size_t kPer = 7;  // field, then (x, −x) of size, fixed power, fixed total
  check_same_size(comm, B, "allreduce_grid (number of blocks)");
  std::vector<double> facts(kPer * B + 3), totals(B);
  for (std::size_t b = 0; b < B; ++b) {
    const double per[kPer] = {double(mine.fields[b]),        double(mine.sizes[b]),
                              -double(mine.sizes[b]),        double(mine.fixed_powers[b]),
                              -double(mine.fixed_powers[b]), double(mine.fixed_terms[b]),
                              -double(mine.fixed_terms[b])};
    std::copy(per, per + kPer, facts.begin() + std::ptrdiff_t(kPer * b));
    totals[b] = static_cast<double>(mine.terms[b]);
  }
  facts[kPer * B] = mine.non_finite ? 1 : 0;
  facts[kPer * B + 1] = mine.wrong_out ? 1 : 0;
  facts[kPer * B + 2] = mine.out_of_bound ? 1 : 0;
  allreduce_max(comm, facts);
  allreduce_sum(comm, totals);  // exact: integers below 2^53
  if (facts[kPer * B + 1] != 0)
    throw ExactSumError(
        "allreduce_grid: an output span does not match the sum's elements on "
        "some rank");
  std::vector<int> grids(B);
  for (std::size_t b = 0; b < B; ++b) {
    const std::span<const double> block(facts.data() + kPer * b, kPer);
    const bool fixed = mine.fixed_powers[b] != GridSum::kNotFixed;
    check_block(comm, b, block, totals[b], fixed);
    grids[b] = fixed ? mine.fixed_powers[b] - precision_of(mine.fixed_terms[b])
                     : power_of(static_cast<int>(block[0])) -
                           precision_of(static_cast<std::int64_t>(totals[b]));
  }
  if (facts[kPer * B + 2] != 0)
    throw ExactSumError(
        "allreduce_grid: a term of a fixed block lies outside the bound its grid was fixed "
        "from, on some rank; the bound given to fix_grid is wrong");
  finite = facts[kPer * B] == 0;
  return grids;
}

// words <- on this rank's chunk (schedule.hpp: chunk `rank` of the words), the sum over
// ranks of that chunk; the other chunks hold partial sums. The ring's reduce-scatter
// (ring.hpp) on int64 words: in round t rank r sends chunk (r − t − 1) mod N to r + 1 and
// adds chunk (r − t − 2) mod N from r − 1, in segments of kSegment words, the next segment's
// receive posted before the current one is added. Integer addition is exact, so the order of
// the ranks' words does not matter. done(begin, count) is called on each piece of this rank's
// chunk as its sum is complete (while it is in cache), in order; at N = 1 on the whole chunk.
// It moves as many bytes as MPI_Reduce_scatter and measured faster in training
// (bench/README-exact.md, "Grids fixed from bounds").
void reduce_scatter_words(const Communicator& comm, std::span<std::int64_t> words,
                          std::vector<std::int64_t>& scratch,
                          const std::function<void(std::size_t, std::size_t)>& done) {
  constexpr std::size_t kSegment = 131072;  // 1 MiB (bench/README-exact.md, "The words' segments")
  constexpr int kTag = 0x6772;              // the grid sum's rounds: kTag + t
  const std::size_t N = static_cast<std::size_t>(comm.size()), M = words.size();
  const std::size_t r = static_cast<std::size_t>(comm.rank());
  const int right = static_cast<int>((r + 1) % N), left = static_cast<int>((r + N - 1) % N);
  scratch.resize(2 * kSegment);
  if (N == 1) done(0, M);
  for (std::size_t t = 0; t + 1 < N; ++t) {
    const std::size_t send = (r + 2 * N - t - 1) % N, recv = (r + 2 * N - t - 2) % N;
    const std::span<std::int64_t> out =
        words.subspan(chunk_begin(M, N, send), chunk_size(M, N, send));
    const std::span<std::int64_t> in =
        words.subspan(chunk_begin(M, N, recv), chunk_size(M, N, recv));
    const std::size_t segments = (std::max(out.size(), in.size()) + kSegment - 1) / kSegment;
    auto piece = [&](std::span<std::int64_t> chunk, std::size_t k) {
      const std::size_t at = std::min(k * kSegment, chunk.size());
      return chunk.subspan(at, std::min(kSegment, chunk.size() - at));
    };
    MPI_Request received = MPI_REQUEST_NULL, sent = MPI_REQUEST_NULL;
    auto post_receive = [&](std::size_t k) {
      const std::span<std::int64_t> next = piece(in, k);
      check_mpi(MPI_Irecv(scratch.data() + (k % 2) * kSegment, int(next.size()), MPI_INT64_T, left,
                          kTag + int(t), comm.handle(), &received),
                "MPI_Irecv(grid words)");
    };
    post_receive(0);
    for (std::size_t k = 0; k < segments; ++k) {
      const std::span<std::int64_t> mine = piece(out, k);
      check_mpi(MPI_Isend(mine.data(), int(mine.size()), MPI_INT64_T, right, kTag + int(t),
                          comm.handle(), &sent),
                "MPI_Isend(grid words)");
      check_mpi(MPI_Wait(&received, MPI_STATUS_IGNORE), "MPI_Wait(grid words)");
      if (k + 1 < segments) post_receive(k + 1);
      const std::span<std::int64_t> add_to = piece(in, k);
      const std::int64_t* got = scratch.data() + (k % 2) * kSegment;
      for (std::size_t i = 0; i < add_to.size(); ++i) add_to[i] += got[i];
      if (t + 2 == N && !add_to.empty())  // the last round adds into this rank's chunk
        done(static_cast<std::size_t>(add_to.data() - words.data()), add_to.size());
      check_mpi(MPI_Wait(&sent, MPI_STATUS_IGNORE), "MPI_Wait(grid words)");
    }
  }
}

}  // namespace

namespace {

// The ranks agree on the grids of `sum` (agree_grids); false if the sum is not finite (out is
// then NaN on every rank).
bool agree(const Communicator& comm, const GridSum& sum, const GridFacts& facts,
           std::span<float> out, std::vector<int>& grids) {
  bool finite = true;
  grids = agree_grids(comm, facts, finite);
  if (sum.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw ExactSumError("allreduce_grid: " + std::to_string(sum.size()) +
                        " elements are too many for one call");
  if (!finite) std::fill(out.begin(), out.end(), std::numeric_limits<float>::quiet_NaN());
  return finite;
}

}  // namespace

// What the ranks agree on before the words are rounded.
GridFacts GridSum::facts(std::size_t out_size) const {
  GridFacts facts;
  facts.fields = max_field_;
  for (std::size_t b = 0; b < blocks(); ++b) facts.sizes.push_back(block_size(b));
  facts.fixed_powers = fixed_power_;
  facts.fixed_terms = fixed_terms_;
  facts.terms = terms_;
  facts.non_finite = non_finite_;
  facts.out_of_bound = out_of_bound_;
  facts.wrong_out = out_size != size();
  return facts;
}

// out[from, from + count) <- the words there rounded, block by block, on their grids.
void GridSum::round_into(std::span<const int> grids, std::size_t from, std::size_t count,
                         std::span<float> out) const {
  for (std::size_t b = 0; b < blocks(); ++b) {
    const std::size_t begin = std::max(begin_[b], from);
    const std::size_t end = std::min(begin_[b + 1], from + count);
    if (begin < end) round_words(&words_[begin], end - begin, grids[b], &out[begin]);
  }
}

bool GridSum::round_own_chunk(const Communicator& comm, std::span<float> out) {
  std::vector<int> grids;
  if (!agree(comm, *this, facts(out.size()), out, grids)) return false;
  convert(grids);
  // Each piece of this rank's chunk, once summed: rounded, block by block.
  const auto round_piece = [&](std::size_t from, std::size_t count) {
    round_into(grids, from, count, out);
  };
  reduce_scatter_words(comm, words_, scratch_words_, round_piece);
  return true;
}

bool allreduce_grid(const Communicator& comm, GridSum& sum, std::span<float> out) {
  if (!sum.round_own_chunk(comm, out)) return false;
  if (comm.size() > 1) all_gather(comm, out);
  return true;
}

bool reduce_scatter_grid(const Communicator& comm, GridSum& sum, std::span<float> out) {
  if (!sum.round_own_chunk(comm, out)) return false;
  const std::size_t N = std::size_t(comm.size()), r = std::size_t(comm.rank());
  const std::span<const float> mine =
      out.subspan(chunk_begin(out.size(), N, r), chunk_size(out.size(), N, r));
  const bool finite =
      std::all_of(mine.begin(), mine.end(), [](float x) { return std::isfinite(x); });
  double not_finite = finite ? 0.0 : 1.0;  // the largest over ranks: 1 if any chunk had Inf
  allreduce_max(comm, std::span(&not_finite, 1));
  return not_finite == 0.0;
}

bool round_exchanged_grid(const Communicator& comm, GridSum& sum, GridExchange& exchange,
                          std::span<float> out) {
  exchange.start_from(0);
  exchange.wait();
  std::vector<int> grids;
  if (!agree(comm, sum, sum.facts(out.size()), out, grids)) return false;
  // Each range: this rank rounds its chunk of the range, the ring all-gathers the range.
  const std::size_t N = std::size_t(comm.size()), r = std::size_t(comm.rank());
  for (std::size_t i = 0; i < exchange.ranges(); ++i) {
    const auto [begin, end] = exchange.range(i);
    sum.round_into(grids, begin + chunk_begin(end - begin, N, r), chunk_size(end - begin, N, r),
                   out);
    if (N > 1) all_gather(comm, out.subspan(begin, end - begin));
  }
  return true;
}

}  // namespace ringtrain::collectives
