// Global sampler and rank slicing (see sampler.hpp). All of it is pure arithmetic on
// (seed, epoch, position) and the configured batch sizes, so every rank computes the same
// answers without talking to the others, and a checkpoint needs only three integers.
#include "ringtrain/framework/data/sampler.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <numeric>
#include <string_view>

#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/random.hpp"

namespace ringtrain::data {

namespace {

constexpr std::uint64_t kMaxSamples = std::uint64_t{1} << 32;  // random::below needs n < 2^32

}  // namespace

void epoch_permutation(std::uint64_t seed, std::uint64_t epoch, std::span<std::uint64_t> out) {
  const std::size_t n = out.size();
  if (n >= kMaxSamples)
    throw UsageError(fmt::format("epoch_permutation: {} samples, at most 2^32 - 1 supported", n));
  std::iota(out.begin(), out.end(), std::uint64_t{0});
  // Fisher–Yates from the back: position i swaps with a uniform j in [0, i]. The draw for
  // position i depends only on (seed, epoch, i), never on how many ranks there are.
  for (std::size_t i = n; i-- > 1;) {
    const std::uint64_t bits = random::hash({seed, random::kStreamSampler, epoch, i});
    const auto j = static_cast<std::size_t>(random::below(bits, i + 1));
    std::swap(out[i], out[j]);
  }
}

std::vector<std::uint64_t> epoch_permutation(std::uint64_t seed, std::uint64_t epoch,
                                             std::size_t n) {
  if (n >= kMaxSamples)
    throw UsageError(fmt::format("epoch_permutation: {} samples, at most 2^32 - 1 supported", n));
  std::vector<std::uint64_t> order(n);
  epoch_permutation(seed, epoch, order);
  return order;
}

GlobalSampler::GlobalSampler(std::uint64_t seed, std::size_t dataset_size, std::size_t global_batch)
    : dataset_size_(dataset_size), global_batch_(global_batch), state_{seed, 0, 0} {
  if (dataset_size_ == 0 || dataset_size_ >= kMaxSamples)
    throw UsageError(
        fmt::format("sampler: dataset of {} samples; need 1 to 2^32 - 1", dataset_size_));
  if (global_batch_ == 0 || global_batch_ > dataset_size_)
    throw UsageError(fmt::format("--global-batch {} must be between 1 and the dataset's {} samples",
                                 global_batch_, dataset_size_));
  permutation_.resize(dataset_size_);
  batch_.resize(global_batch_);
  epoch_permutation(state_.seed, state_.epoch, permutation_);
}

GlobalBatch GlobalSampler::next_batch() {
  // n = 10, B = 4: positions [0,4), [4,8), [8,10) (short), then epoch + 1 and [0,4) again.
  const std::uint64_t begin = state_.position;
  const auto count =
      static_cast<std::size_t>(std::min<std::uint64_t>(global_batch_, dataset_size_ - begin));
  std::copy_n(permutation_.begin() + static_cast<std::ptrdiff_t>(begin), count, batch_.begin());
  const GlobalBatch batch{state_.epoch, begin, std::span<const std::uint64_t>(batch_).first(count)};

  state_.position += count;
  if (state_.position == dataset_size_) {
    state_.epoch += 1;
    state_.position = 0;
    epoch_permutation(state_.seed, state_.epoch, permutation_);  // in place, no allocation
  }
  return batch;
}

void GlobalSampler::restore(const SamplerState& state) {
  if (state.position >= dataset_size_)
    throw DataError(
        fmt::format("sampler state: position {} of epoch {} is not inside the "
                    "dataset of {} samples; was the checkpoint written for a "
                    "different dataset?",
                    state.position, state.epoch, dataset_size_));
  const bool same_order = state.seed == state_.seed && state.epoch == state_.epoch;
  state_ = state;
  if (!same_order) epoch_permutation(state_.seed, state_.epoch, permutation_);
}

std::vector<std::size_t> near_equal_split(std::size_t batch, std::size_t ranks) {
  if (ranks == 0) throw UsageError("near_equal_split: 0 ranks");
  // batch 10 over 4 ranks: base 2, remainder 2 -> the first 2 ranks take one more: {3, 3, 2, 2}
  const std::size_t base = batch / ranks;
  const std::size_t remainder = batch % ranks;
  std::vector<std::size_t> sizes(ranks, base);
  for (std::size_t r = 0; r < remainder; ++r) sizes[r] += 1;
  return sizes;
}

Slice rank_slice(std::span<const std::size_t> local_batches, std::size_t rank,
                 std::size_t actual_batch) {
  if (rank >= local_batches.size())
    throw Error(
        fmt::format("rank_slice: rank {} but only {} local batches", rank, local_batches.size()));
  // local batches {1, 3} (B = 4):
  //   full batch,   actual 4: rank 0 [0, 1), rank 1 [1, 4)
  //   short batch,  actual 2: rank 0 [0, 1), rank 1 [1, 2)      (clipped at 2)
  //   short batch,  actual 1: rank 0 [0, 1), rank 1 [1, 1) = 0 samples
  std::size_t total = 0;
  std::size_t offset = 0;  // prefix sum of local_batches[0..rank)
  for (std::size_t r = 0; r < local_batches.size(); ++r) {
    if (r == rank) offset = total;
    total += local_batches[r];
  }
  if (actual_batch > total)
    throw Error(fmt::format("rank_slice: a batch of {} samples but the local batches sum to {}",
                            actual_batch, total));
  const std::size_t begin = std::min(offset, actual_batch);
  const std::size_t end = std::min(offset + local_batches[rank], actual_batch);
  return {begin, end - begin};
}

std::vector<std::size_t> parse_local_batches(const std::string& text, std::size_t ranks,
                                             std::size_t global_batch) {
  const std::string hint = fmt::format(
      "give one non-negative count per rank that add up to the global batch, e.g. "
      "--local-batches {}",
      fmt::join(near_equal_split(global_batch, std::max<std::size_t>(ranks, 1)), ","));
  std::vector<std::size_t> counts;
  std::string_view rest = text;
  while (true) {
    const std::size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item.empty())
      throw UsageError(fmt::format("--local-batches '{}' has an empty item; {}", text, hint));
    if (item.front() == '-')
      throw UsageError(fmt::format("--local-batches {}: {} is negative; {}", text, item, hint));
    std::uint64_t value = 0;
    const char* last = item.data() + item.size();
    const auto [ptr, ec] = std::from_chars(item.data(), last, value);
    if (ec == std::errc::result_out_of_range)
      throw UsageError(fmt::format("--local-batches {}: {} is too large; {}", text, item, hint));
    if (ec != std::errc() || ptr != last)
      throw UsageError(
          fmt::format("--local-batches {}: '{}' is not a number; {}", text, item, hint));
    counts.push_back(static_cast<std::size_t>(value));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (counts.size() != ranks)
    throw UsageError(fmt::format("--local-batches {} lists {} values but there are {} ranks; {}",
                                 text, counts.size(), ranks, hint));
  std::uint64_t sum = 0;  // saturating, so absurd values cannot wrap around to the right sum
  for (std::size_t c : counts) sum = (c > UINT64_MAX - sum) ? UINT64_MAX : sum + c;
  if (sum != global_batch)
    throw UsageError(fmt::format("--local-batches {} sum to {} but --global-batch is {}; {}", text,
                                 sum, global_batch, hint));
  return counts;
}

}  // namespace ringtrain::data
