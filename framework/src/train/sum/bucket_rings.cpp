// The ring pool of the gradient sum (see bucket_rings.hpp).
#include "train/sum/bucket_rings.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "ringtrain/framework/error.hpp"
#include "train/now.hpp"

namespace ringtrain {

namespace coll = collectives;

namespace {

// Ring `index`'s options: `base` with its own tag range [tag + index·2N, tag + (index+1)·2N).
// The sizes were agreed once (GradientReducer's constructor), so the rings skip the check.
coll::RingOptions ring_options(const coll::RingOptions& base, std::size_t index, int N) {
  coll::RingOptions options = base;
  options.check_sizes = false;
  options.tag = base.tag + static_cast<int>(index) * 2 * N;
  return options;
}

// The elements the buckets cover: [0, end).
std::size_t end_of(std::span<const coll::Bucket> buckets) {
  std::size_t end = 0;
  for (const coll::Bucket& k : buckets) end = std::max(end, k.offset + k.elements);
  return end;
}

}  // namespace

BucketRings::BucketRings(const coll::Communicator& comm, std::span<const coll::Bucket> buckets,
                         const coll::RingOptions& ring, bool zero, StepComm& account)
    : comm_(comm),
      buckets_(buckets.begin(), buckets.end()),
      zero_(zero),
      account_(account),
      feedback_(ring.wire == coll::Wire::kBf16 ? end_of(buckets) : 0) {
  const int N = comm_.size();
  const long long last_tag =
      static_cast<long long>(ring.tag) + static_cast<long long>(buckets_.size() + 1) * 2 * N;
  if (last_tag > comm_.tag_upper_bound())
    throw UsageError(
        fmt::format("{} gradient buckets need message tags up to {}, but MPI allows "
                    "{}; raise --bucket-bytes",
                    buckets_.size(), last_tag, comm_.tag_upper_bound()));
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    rings_.push_back(std::make_unique<BucketRing>());
    rings_.back()->options = ring_options(ring, b, N);
  }
  agreement_options_ = ring_options(ring, buckets_.size(), N);
  agreement_options_.wire = coll::Wire::kFp32;  // a count of ranks, not a gradient
}

void BucketRings::begin_step(std::size_t segments_in_flight) {
  for (auto& f : rings_) {
    f->options.segments_in_flight = segments_in_flight;
    f->started = f->summed = f->updated = f->gathering = f->gathered = false;
  }
  started_ = summed_ = gathering_ = gathered_ = 0;
}

void BucketRings::start_sum(std::size_t b, std::span<float> grads) {
  const coll::Bucket& k = buckets_[b];
  std::span<float> data = grads.subspan(k.offset, k.elements);
  BucketRing& f = *rings_[b];
  f.start_s = now_s();
  f.started = true;
  std::span<float> residual = feedback_.residual();
  if (!residual.empty()) {
    feedback_.add_to(data, k.offset);
    residual = residual.subspan(k.offset, k.elements);
  }
  f.ring.start(comm_, data, f.options,
               zero_ ? coll::Collective::kReduceScatter : coll::Collective::kAllreduce, residual);
  ++started_;
  if (comm_.size() > 1) ++account_.collectives;
  account_.bytes += double(data.size_bytes());
}

// The all-gather half of the ring whose reduce-scatter summed the gradient: this rank's
// chunk of the bucket's updated parameters goes to every rank.
void BucketRings::start_gather(std::size_t b, std::span<float> params) {
  const coll::Bucket& k = buckets_[b];
  BucketRing& f = *rings_[b];
  f.gather_start_s = now_s();
  f.gathering = true;
  ++gathering_;
  coll::RingOptions options = f.options;
  options.wire = coll::Wire::kFp32;  // parameters, not gradients: never rounded
  f.ring.start(comm_, params.subspan(k.offset, k.elements), options, coll::Collective::kAllGather);
  if (comm_.size() > 1) ++account_.collectives;
}

void add_wire_bytes(StepComm& account, const coll::AsyncAllreduce& ring) {
  const coll::Counters c = ring.counters();
  account.wire_bytes += double(c.bytes_sent);
  account.inter_host_bytes += double(c.inter_host_bytes_sent);
}

void BucketRings::note_summed(BucketRing& f, double now) {
  add_wire_bytes(account_, f.ring);
  f.summed = true;
  f.done_s = now;
  ++summed_;
  account_.comm_s += now - f.start_s;
}

void BucketRings::note_gathered(BucketRing& f, double now) {
  add_wire_bytes(account_, f.ring);
  f.done_s = now;
  f.gathering = false;
  f.gathered = true;
  --gathering_;
  ++gathered_;
  account_.comm_s += f.done_s - f.gather_start_s;
}

bool BucketRings::poll() {
  bool any = false;
  for (std::size_t b = 0; b < started_; ++b) {
    BucketRing& f = *rings_[b];
    if (!f.summed && f.ring.progress()) {
      note_summed(f, now_s());
      any = true;
    } else if (f.gathering && f.ring.progress()) {
      note_gathered(f, now_s());
      any = true;
    }
  }
  return any;
}

void BucketRings::wait(std::size_t b) {
  BucketRing& f = *rings_[b];
  f.ring.wait();
  if (f.gathering)  // also when the sum ran elsewhere (GradientReducer::begin_summed)
    note_gathered(f, now_s());
  else if (!f.summed)
    note_summed(f, now_s());
}

bool BucketRings::all_updated() const {
  return std::all_of(rings_.begin(), rings_.end(), [](const auto& f) { return f->updated; });
}

std::size_t BucketRings::events() const {
  std::size_t events = 0;
  for (std::size_t b = 0; b < started_; ++b) events += rings_[b]->ring.events();
  return events;
}

}  // namespace ringtrain
